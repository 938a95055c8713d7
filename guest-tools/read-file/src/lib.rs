//! The built-in `read_file` tool as a `bb7:tool@0.1.0` component.
bb7_guest_glue::builtin_tool!(read_file);
