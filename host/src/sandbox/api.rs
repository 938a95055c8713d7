//! The versions of the `bb7:tool` WIT contract this host speaks, behind one version-neutral surface.
//!
//! Each version's bindings live in their own module, generated from its frozen directory under
//! `wit/`. A component is matched to a version by the interface it exports; adding `0.2.0` means
//! adding a module, a [`WitVersion`] variant and a [`ToolPre`] arm, while `0.1.0` components keep
//! working.

use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

/// Bindings for `bb7:tool@0.1.0` (`wit/v0.1.0`). Generated: their documentation is the WIT's.
#[allow(missing_docs)]
pub mod v0_1_0 {
    wasmtime::component::bindgen!({
        world: "tool-component",
        path: "../wit/v0.1.0",
    });
}

/// A version of the tool contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WitVersion {
    /// `bb7:tool@0.1.0` (`wit/v0.1.0`).
    V0_1_0,
    /// No `bb7:tool` interface: a generic component, whose exported functions are the tools
    /// ([`super::dynamic`]).
    Generic,
}

impl WitVersion {
    /// Every version this host can run, oldest first.
    pub const SUPPORTED: [WitVersion; 1] = [WitVersion::V0_1_0];

    /// The semantic version, e.g. `0.1.0`.
    pub fn as_str(self) -> &'static str {
        match self {
            WitVersion::V0_1_0 => "0.1.0",
            WitVersion::Generic => "generic",
        }
    }

    /// The fully qualified interface a component of this version exports.
    pub fn export_name(self) -> &'static str {
        match self {
            WitVersion::V0_1_0 => "bb7:tool/tool@0.1.0",
            WitVersion::Generic => "(exported functions)",
        }
    }

    /// The contract's types-only interface of this version; components import it, but it holds
    /// type definitions only, so it gives them no capability.
    pub fn types_name(self) -> &'static str {
        match self {
            WitVersion::V0_1_0 => "bb7:tool/types@0.1.0",
            // A generic component may import the contract's types too.
            WitVersion::Generic => "bb7:tool/types@0.1.0",
        }
    }

    /// The newest supported version `component` exports, if any.
    pub fn detect(engine: &Engine, component: &Component) -> Option<WitVersion> {
        let ty = component.component_type();
        let exports: Vec<&str> = ty.exports(engine).map(|(name, _)| name).collect();
        Self::SUPPORTED
            .iter()
            .rev()
            .copied()
            .find(|v| exports.contains(&v.export_name()))
    }
}

/// A tool's self-description, whatever its WIT version.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolInfo {
    /// The tool's name, as the component gave it.
    pub name: String,
    /// What the tool does, as the component gave it; the model is shown it.
    pub description: String,
    /// The JSON Schema of the arguments, as the component gave it.
    pub parameters_schema: String,
}

/// A structured failure returned by the component (not a trap).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolFailure {
    /// The WIT `error-kind` name (`invalid-arguments`, `conflict`, …).
    pub kind: String,
    /// The component's error message.
    pub message: String,
}

/// A component linked and ready to instantiate cheaply, for one of the supported versions.
pub enum ToolPre<T: 'static> {
    /// A `0.1.0` component.
    V0_1_0(v0_1_0::ToolComponentPre<T>),
    /// The `0.1.0` component holding every built-in tool, for the built-in tool named here (it is
    /// passed to the component as the `builtin` setting, after the host's own settings).
    Builtin(v0_1_0::ToolComponentPre<T>, &'static str),
    /// A generic component (its exported functions are the tools).
    Generic(super::dynamic::GenericPre<T>),
}

impl<T: 'static> Clone for ToolPre<T> {
    fn clone(&self) -> Self {
        match self {
            ToolPre::V0_1_0(p) => ToolPre::V0_1_0(p.clone()),
            ToolPre::Builtin(p, tool) => ToolPre::Builtin(p.clone(), tool),
            ToolPre::Generic(p) => ToolPre::Generic(p.clone()),
        }
    }
}

impl<T: Send + 'static> ToolPre<T> {
    /// Links `component` (of `version`) against `linker`; fails when it imports something the linker
    /// does not provide (anything but WASI).
    pub fn new(
        linker: &Linker<T>,
        component: &Component,
        version: WitVersion,
    ) -> wasmtime::Result<Self> {
        let pre = linker.instantiate_pre(component)?;
        Ok(match version {
            WitVersion::V0_1_0 => ToolPre::V0_1_0(v0_1_0::ToolComponentPre::new(pre)?),
            WitVersion::Generic => ToolPre::Generic(super::dynamic::GenericPre {
                pre,
                exports: Default::default(),
                selected: None,
            }),
        })
    }

    /// Instantiates into `store` and calls `describe`.
    pub fn describe(
        &self,
        store: &mut Store<T>,
        settings: &[(String, String)],
    ) -> wasmtime::Result<Result<ToolInfo, ToolFailure>> {
        match self {
            ToolPre::V0_1_0(pre) => describe_v0_1_0(pre, store, settings_v0_1_0(settings, None)),
            ToolPre::Builtin(pre, tool) => {
                describe_v0_1_0(pre, store, settings_v0_1_0(settings, Some(tool)))
            }
            ToolPre::Generic(g) => Ok(Err(ToolFailure {
                kind: "invalid-arguments".into(),
                message: format!(
                    "a generic component does not describe itself; its tools are its {} exported function(s)",
                    g.exports.functions.len()
                ),
            })),
        }
    }

    /// Instantiates into `store` and calls `call` with the JSON `arguments`.
    pub fn call(
        &self,
        store: &mut Store<T>,
        settings: &[(String, String)],
        arguments: &str,
    ) -> wasmtime::Result<Result<String, ToolFailure>> {
        match self {
            ToolPre::V0_1_0(pre) => {
                call_v0_1_0(pre, store, settings_v0_1_0(settings, None), arguments)
            }
            ToolPre::Builtin(pre, tool) => {
                call_v0_1_0(pre, store, settings_v0_1_0(settings, Some(tool)), arguments)
            }
            ToolPre::Generic(g) => Ok(g.call(store, arguments)?.map_err(|f| ToolFailure {
                kind: f.kind.to_string(),
                message: f.message,
            })),
        }
    }
}

fn describe_v0_1_0<T: Send + 'static>(
    pre: &v0_1_0::ToolComponentPre<T>,
    store: &mut Store<T>,
    settings: Vec<v0_1_0::exports::bb7::tool::tool::Setting>,
) -> wasmtime::Result<Result<ToolInfo, ToolFailure>> {
    use v0_1_0::exports::bb7::tool::tool as t;
    let inst = pre.instantiate(&mut *store)?;
    let r = inst.bb7_tool_tool().call_describe(&mut *store, &settings)?;
    Ok(r.map(|i: t::ToolInfo| ToolInfo {
        name: i.name,
        description: i.description,
        parameters_schema: i.parameters_schema,
    })
    .map_err(failure_v0_1_0))
}

fn call_v0_1_0<T: Send + 'static>(
    pre: &v0_1_0::ToolComponentPre<T>,
    store: &mut Store<T>,
    settings: Vec<v0_1_0::exports::bb7::tool::tool::Setting>,
    arguments: &str,
) -> wasmtime::Result<Result<String, ToolFailure>> {
    let inst = pre.instantiate(&mut *store)?;
    let r = inst
        .bb7_tool_tool()
        .call_call(&mut *store, &settings, arguments)?;
    Ok(r.map_err(failure_v0_1_0))
}

/// The settings as the WIT records, with the built-in tool a call is for appended as `builtin`
/// (last, so that no host setting can name another tool).
fn settings_v0_1_0(
    settings: &[(String, String)],
    builtin: Option<&str>,
) -> Vec<v0_1_0::exports::bb7::tool::tool::Setting> {
    use v0_1_0::exports::bb7::tool::tool::Setting;
    let own = builtin.map(|tool| Setting {
        key: BUILTIN_SETTING.to_string(),
        value: tool.to_string(),
    });
    settings
        .iter()
        .filter(|(k, _)| builtin.is_none() || k != BUILTIN_SETTING)
        .map(|(k, v)| Setting {
            key: k.clone(),
            value: v.clone(),
        })
        .chain(own)
        .collect()
}

/// The setting naming the built-in tool a call of the all-in-one built-in component is for
/// (`guest-tools/guest-glue`'s `BUILTIN_SETTING`).
pub const BUILTIN_SETTING: &str = "builtin";

fn failure_v0_1_0(e: v0_1_0::exports::bb7::tool::tool::ToolError) -> ToolFailure {
    use v0_1_0::bb7::tool::types::ErrorKind as K;
    let kind = match e.kind {
        K::InvalidArguments => "invalid-arguments",
        K::NotFound => "not-found",
        K::PermissionDenied => "permission-denied",
        K::Conflict => "conflict",
        K::TooLarge => "too-large",
        K::NotText => "not-text",
        K::Io => "io",
    };
    ToolFailure {
        kind: kind.to_string(),
        message: e.message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builtin_setting_is_the_hosts_and_comes_last() {
        let host = vec![
            ("diff-mode".to_string(), "anchored".to_string()),
            (BUILTIN_SETTING.to_string(), "write_file".to_string()),
        ];
        let pairs: Vec<(String, String)> = settings_v0_1_0(&host, Some("read_file"))
            .into_iter()
            .map(|s| (s.key, s.value))
            .collect();
        assert_eq!(
            pairs,
            vec![
                ("diff-mode".to_string(), "anchored".to_string()),
                (BUILTIN_SETTING.to_string(), "read_file".to_string()),
            ],
            "a setting from elsewhere never names the built-in a call runs"
        );
        let third_party: Vec<String> = settings_v0_1_0(&host, None)
            .into_iter()
            .map(|s| s.key)
            .collect();
        assert_eq!(third_party, vec!["diff-mode", BUILTIN_SETTING]);
    }
}
