//! A generic component's tools as [`ToolComponent`]s: what it offers, and one exported function
//! chosen to call (kept apart from `registry.rs` and `dynamic.rs`, which it joins).

use super::api::ToolPre;
use super::registry::ToolComponent;

impl ToolComponent {
    /// What a generic component offers (`None` for a `bb7:tool` component).
    pub fn generic(&self) -> Option<&super::dynamic::GenericExports> {
        match &self.pre {
            ToolPre::Generic(g) => Some(&g.exports),
            _ => None,
        }
    }

    /// The generic component's tool `tool` (its name inside the component, e.g. `read_file`),
    /// ready to call: named `<component>__<tool>` in call records. `None` when there is no such
    /// tool or this is not a generic component.
    pub fn function(&self, tool: &str) -> Option<ToolComponent> {
        let ToolPre::Generic(g) = &self.pre else {
            return None;
        };
        let i = g.exports.functions.iter().position(|f| f.tool == tool)?;
        Some(ToolComponent {
            name: format!("{}__{tool}", self.name),
            origin: self.origin.clone(),
            sha256: self.sha256.clone(),
            size: self.size,
            wit_version: self.wit_version,
            policy: self.policy.clone(),
            imports: self.imports.clone(),
            cache: self.cache,
            limits: self.limits,
            third_party: self.third_party.clone(),
            load_ms: self.load_ms,
            load_reported: std::sync::atomic::AtomicBool::new(
                self.load_reported
                    .load(std::sync::atomic::Ordering::Relaxed),
            ),
            pre: ToolPre::Generic(super::dynamic::GenericPre {
                selected: Some(i),
                ..g.clone()
            }),
        })
    }
}
