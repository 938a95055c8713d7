//! The five built-in tools as one `bb7:tool@0.1.0` component, the one `bb7` embeds: they share
//! their code (tool-logic, serde_json, the standard library) instead of carrying it five times. The
//! host names the tool of each describe or call in the `builtin` setting.
bb7_guest_glue::builtin_tools!();
