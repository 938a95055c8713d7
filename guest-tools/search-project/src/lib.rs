//! The built-in `search_project` tool as a `bb7:tool@0.1.0` component.
bb7_guest_glue::builtin_tool!(search_project);
