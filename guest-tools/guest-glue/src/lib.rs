//! Bindings for `bb7:tool@0.1.0` and the [`builtin_tool!`] macro that makes a built-in tool of
//! `bb7-tool-logic` into a component. Each built-in tool crate is one line of this macro, so all five
//! components share one tested code path; [`builtin_tools!`] makes the one component `bb7` embeds,
//! which holds all five and is told by the host which of them a describe or call is for.

wit_bindgen::generate!({
    path: "../../wit/v0.1.0",
    world: "tool-component",
    pub_export_macro: true,
    export_macro_name: "export_tool",
    default_bindings_module: "bb7_guest_glue",
});

pub use bb7::tool::types::ErrorKind;
pub use exports::bb7::tool::tool::{Guest, Setting, ToolError, ToolInfo};

use bb7_tool_logic::{Settings, ToolError as LogicError};

/// Converts the host's settings, failing like the tool would on a bad value.
pub fn settings(pairs: &[Setting]) -> Result<Settings, ToolError> {
    Settings::from_pairs(pairs.iter().map(|s| (s.key.as_str(), s.value.as_str()))).map_err(to_wit)
}

/// Converts a logic error into the WIT error record.
pub fn to_wit(e: LogicError) -> ToolError {
    use bb7_tool_logic::ErrorKind as K;
    let kind = match e.kind {
        K::InvalidArguments => ErrorKind::InvalidArguments,
        K::NotFound => ErrorKind::NotFound,
        K::PermissionDenied => ErrorKind::PermissionDenied,
        K::Conflict => ErrorKind::Conflict,
        K::TooLarge => ErrorKind::TooLarge,
        K::NotText => ErrorKind::NotText,
        K::Io => ErrorKind::Io,
    };
    ToolError {
        kind,
        message: e.message,
    }
}

/// Converts a logic tool description into the WIT record.
pub fn to_info(info: bb7_tool_logic::tools::ToolInfo) -> ToolInfo {
    ToolInfo {
        name: info.name,
        description: info.description,
        parameters_schema: info.parameters.to_string(),
    }
}

/// Exports built-in tool `$module` (a module of `bb7_tool_logic::tools`) as this crate's component.
#[macro_export]
macro_rules! builtin_tool {
    ($module:ident) => {
        struct Component;

        impl $crate::Guest for Component {
            fn describe(settings: Vec<$crate::Setting>) -> Result<$crate::ToolInfo, $crate::ToolError> {
                let settings = $crate::settings(&settings)?;
                Ok($crate::to_info(bb7_tool_logic::tools::$module::describe(&settings)))
            }

            fn call(settings: Vec<$crate::Setting>, arguments: String) -> Result<String, $crate::ToolError> {
                let settings = $crate::settings(&settings)?;
                let root = bb7_tool_logic::Root::sandboxed().with_settings(&settings);
                bb7_tool_logic::tools::$module::call(&root, &settings, &arguments)
                    .map(|v| v.to_string())
                    .map_err($crate::to_wit)
            }
        }

        $crate::export_tool!(Component with_types_in $crate);
    };
}

/// The setting that names the built-in tool a describe or call of the all-in-one component
/// ([`builtin_tools!`]) is for. The host sets it; it is not a tool setting.
pub const BUILTIN_SETTING: &str = "builtin";

/// The tool a describe or call of the all-in-one component is for (the [`BUILTIN_SETTING`]).
pub fn selected(pairs: &[Setting]) -> Result<&str, ToolError> {
    let tool = pairs
        .iter()
        .find(|s| s.key == BUILTIN_SETTING)
        .map(|s| s.value.as_str())
        .ok_or_else(|| ToolError {
            kind: ErrorKind::InvalidArguments,
            message: format!(
                "this component holds every built-in tool ({}); the `{BUILTIN_SETTING}` setting names the one to run",
                bb7_tool_logic::tools::BUILTIN.join(", ")
            ),
        })?;
    match bb7_tool_logic::tools::BUILTIN.contains(&tool) {
        true => Ok(tool),
        false => Err(ToolError {
            kind: ErrorKind::InvalidArguments,
            message: format!("unknown built-in tool: {tool}"),
        }),
    }
}

/// Exports all five built-in tools of `bb7_tool_logic::tools` as this crate's one component; each
/// describe or call runs the tool its [`BUILTIN_SETTING`] names. `bb7` embeds this component once
/// (the tools share their code), and instantiates it per call with only that tool's grant.
#[macro_export]
macro_rules! builtin_tools {
    () => {
        struct Component;

        impl $crate::Guest for Component {
            fn describe(settings: Vec<$crate::Setting>) -> Result<$crate::ToolInfo, $crate::ToolError> {
                let tool = $crate::selected(&settings)?;
                let parsed = $crate::settings(&settings)?;
                bb7_tool_logic::tools::describe(tool, &parsed)
                    .map($crate::to_info)
                    .ok_or_else(|| $crate::to_wit(bb7_tool_logic::ToolError::invalid(format!("unknown built-in tool: {tool}"))))
            }

            fn call(settings: Vec<$crate::Setting>, arguments: String) -> Result<String, $crate::ToolError> {
                let tool = $crate::selected(&settings)?;
                let parsed = $crate::settings(&settings)?;
                let root = bb7_tool_logic::Root::sandboxed().with_settings(&parsed);
                bb7_tool_logic::tools::call(tool, &root, &parsed, &arguments)
                    .map(|v| v.to_string())
                    .map_err($crate::to_wit)
            }
        }

        $crate::export_tool!(Component with_types_in $crate);
    };
}
