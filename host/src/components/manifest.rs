//! The manifest a third-party component ships (`bb7-tool.toml` beside the `.wasm`, or the same TOML
//! in a custom section named `bb7-manifest`): who it is and the capabilities it requests.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::error::{ComponentError, FieldError};
use crate::sandbox::api::WitVersion;
use crate::sandbox::grant::check_host_port;
use crate::sandbox::http::normalize_origin;
use crate::sandbox::limits::Limits;
use crate::sandbox::registry::read_component;

/// The manifest file name looked for beside a component.
pub const MANIFEST_FILE: &str = "bb7-tool.toml";
/// The custom section a component may carry its manifest in.
pub const MANIFEST_SECTION: &str = "bb7-manifest";
/// The longest component name.
const MAX_NAME: usize = 32;

/// The filesystem capability a component requests or is granted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Files {
    /// No directory at all.
    #[default]
    None,
    /// A read-only view of the project: no `.git/`, `.bb7/`, ignored or deny-listed files, no links.
    ProjectRead,
    /// An empty directory whose files become the reply's proposed new files.
    OutputWrite,
}

impl Files {
    /// The name used in manifests, grants and the lockfile.
    pub fn as_str(self) -> &'static str {
        match self {
            Files::None => "none",
            Files::ProjectRead => "project-read",
            Files::OutputWrite => "output-write",
        }
    }

    /// Parses a manifest or command-line value.
    pub fn parse(s: &str) -> Result<Files, FieldError> {
        match s {
            "none" => Ok(Files::None),
            "project-read" => Ok(Files::ProjectRead),
            "output-write" => Ok(Files::OutputWrite),
            other => Err(FieldError::Files(other.to_string())),
        }
    }
}

/// A set of capabilities: what a manifest requests, or what the user granted.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct Capabilities {
    /// The directory the component's calls receive.
    #[serde(default)]
    pub files: Files,
    /// `host:port` pairs it may open TCP connections to, sorted.
    #[serde(default)]
    pub network: Vec<String>,
    /// Host environment variables it may read, sorted.
    #[serde(default)]
    pub env: Vec<String>,
    /// Origins its `wasi:http` requests may go to (`https://host[:port]`, normalised), sorted.
    /// Omitted when empty, so grants and lockfiles without HTTP read and write as before.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub http: Vec<String>,
}

impl Capabilities {
    /// Whether every capability of `self` is within `other`.
    pub fn within(&self, other: &Capabilities) -> bool {
        self.excess(other).is_empty()
    }

    /// What `self` has beyond `other`, worded for the user (empty: nothing).
    pub fn excess(&self, other: &Capabilities) -> Vec<String> {
        let mut out = Vec::new();
        if self.files != Files::None && self.files != other.files {
            out.push(format!("files = {}", self.files.as_str()));
        }
        for n in &self.network {
            if !other.network.contains(n) {
                out.push(format!("network {n}"));
            }
        }
        for e in &self.env {
            if !other.env.contains(e) {
                out.push(format!("env {e}"));
            }
        }
        for o in &self.http {
            if !other.http.contains(o) {
                out.push(format!("http {o}"));
            }
        }
        out
    }

    /// One line for people: `files project-read; network api.x.org:443; env none`, then
    /// `; http https://api.x.org` when it has origins.
    pub fn summary(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                "none".to_string()
            } else {
                v.join(", ")
            }
        };
        let http = if self.http.is_empty() {
            String::new()
        } else {
            format!("; http {}", self.http.join(", "))
        };
        format!(
            "files {}; network {}; env {}{http}",
            self.files.as_str(),
            list(&self.network),
            list(&self.env)
        )
    }

    /// Checks every entry and sorts the lists (duplicates removed).
    pub fn validated(mut self) -> Result<Capabilities, FieldError> {
        for n in &self.network {
            check_host_port(n)?;
        }
        for e in &self.env {
            check_env_name(e)?;
        }
        self.http = self
            .http
            .iter()
            .map(|o| normalize_origin(o))
            .collect::<Result<_, _>>()?;
        self.http.sort();
        self.http.dedup();
        self.network.sort();
        self.network.dedup();
        self.env.sort();
        self.env.dedup();
        Ok(self)
    }
}

/// Tighter limits a manifest may ask for (never looser than the host's).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct ManifestLimits {
    /// Memory, in MiB.
    pub memory_mib: Option<u64>,
    /// Wall time per call, in milliseconds.
    pub wall_time_ms: Option<u64>,
    /// Result size, in KiB.
    pub result_kib: Option<u64>,
}

impl ManifestLimits {
    /// `base` tightened by these limits; a value looser than `base` (or zero) is an error.
    pub fn apply(&self, base: Limits) -> Result<Limits, FieldError> {
        let mut l = base;
        if let Some(m) = self.memory_mib {
            let bytes = m.saturating_mul(1 << 20);
            if m == 0 || bytes > base.memory_bytes {
                return Err(FieldError::Limit {
                    field: "memory_mib",
                    max: base.memory_bytes >> 20,
                });
            }
            l.memory_bytes = bytes;
        }
        if let Some(ms) = self.wall_time_ms {
            let max = base.wall_time.as_millis() as u64;
            if ms == 0 || ms > max {
                return Err(FieldError::Limit {
                    field: "wall_time_ms",
                    max,
                });
            }
            l.wall_time = std::time::Duration::from_millis(ms);
        }
        if let Some(k) = self.result_kib {
            let max = (base.result_bytes >> 10) as u64;
            if k == 0 || k > max {
                return Err(FieldError::Limit {
                    field: "result_kib",
                    max,
                });
            }
            l.result_bytes = (k << 10) as usize;
        }
        Ok(l)
    }
}

/// A parsed and validated manifest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// The component's name: `[a-z][a-z0-9_]*`, at most 32 characters, no `__`.
    pub name: String,
    /// The component's own version (free text).
    pub version: String,
    /// The `bb7:tool` contract version it is built against; empty for a generic component (the
    /// manifest omits `wit`: its exported functions are its tools).
    pub wit: String,
    /// What it does, for people.
    pub description: String,
    /// The capabilities it requests.
    pub requested: Capabilities,
    /// Tighter limits it asks for.
    pub limits: ManifestLimits,
    /// A generic component's tool descriptions (`[tools.<function>]`), by function name.
    #[serde(default)]
    pub tools: std::collections::BTreeMap<String, ToolDoc>,
    /// A hook's points (`hook = ["pre_tool_call", …]`, ECOSYSTEM-PROTOCOL.md §8): it exports
    /// `bb7:hook/hook` and is asked to decide there; empty for a tool component.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hook: Vec<String>,
}

/// `[tools.<function>]`: a generic component's tool described by its manifest.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolDoc {
    /// What the tool does (the model is shown it).
    #[serde(default)]
    pub description: Option<String>,
    /// Each parameter's description, by its WIT name.
    #[serde(default)]
    pub params: std::collections::BTreeMap<String, String>,
}

/// The manifest as written: flat keys, unknown keys refused.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawManifest {
    name: String,
    version: String,
    #[serde(default)]
    wit: Option<String>,
    #[serde(default)]
    description: String,
    #[serde(default)]
    tools: std::collections::BTreeMap<String, ToolDoc>,
    #[serde(default)]
    files: Option<String>,
    #[serde(default)]
    network: Vec<String>,
    #[serde(default)]
    env: Vec<String>,
    #[serde(default)]
    http: Vec<String>,
    #[serde(default)]
    limits: ManifestLimits,
    #[serde(default)]
    hook: Option<Vec<String>>,
}

/// The points a hook may name (`hook = […]`), in the order an action meets them.
pub const HOOK_POINTS: [&str; 4] = ["pre_send", "pre_tool_call", "post_tool_call", "pre_apply"];

/// Checks a manifest's `hook` list: at least one point, each one of [`HOOK_POINTS`]; sorted into
/// that order, duplicates removed.
fn hook_points(points: Option<Vec<String>>) -> Result<Vec<String>, FieldError> {
    let Some(points) = points else {
        return Ok(Vec::new());
    };
    if let Some(bad) = points.iter().find(|p| !HOOK_POINTS.contains(&p.as_str())) {
        return Err(FieldError::HookPoint(bad.clone()));
    }
    let out: Vec<String> = HOOK_POINTS
        .iter()
        .filter(|p| points.iter().any(|q| q == *p))
        .map(|p| p.to_string())
        .collect();
    if out.is_empty() {
        return Err(FieldError::HookPoint(String::new()));
    }
    Ok(out)
}

impl Manifest {
    /// Parses and validates manifest text; `origin` names where it came from in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Manifest, ComponentError> {
        // toml's own message quotes the offending line: a "manifest" that is a link to a secret
        // (`~/.git-credentials`) would print it. Only the line, the column and toml's one-line
        // reason are shown.
        let raw: RawManifest = toml::from_str(text).map_err(|e| {
            let at = e.span().map_or(0, |s| s.start).min(text.len());
            let at = (0..=at)
                .rev()
                .find(|i| text.is_char_boundary(*i))
                .unwrap_or(0);
            let line = text[..at].matches('\n').count() + 1;
            let column = text[..at]
                .rsplit('\n')
                .next()
                .map_or(0, |l| l.chars().count())
                + 1;
            ComponentError::ManifestSyntax {
                origin: origin.to_string(),
                line,
                column,
                reason: e
                    .message()
                    .lines()
                    .next()
                    .unwrap_or("not valid TOML")
                    .trim()
                    .to_string(),
            }
        })?;
        let bad = |err: FieldError| ComponentError::Manifest {
            origin: origin.to_string(),
            err,
        };
        check_name(&raw.name).map_err(bad)?;
        if raw.version.trim().is_empty() || raw.version.len() > 64 {
            return Err(bad(FieldError::Version));
        }
        let wit = raw.wit.unwrap_or_default();
        if !wit.is_empty() && !WitVersion::SUPPORTED.iter().any(|v| v.as_str() == wit) {
            return Err(bad(FieldError::Wit {
                wit,
                supported: WitVersion::SUPPORTED
                    .iter()
                    .map(|v| v.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            }));
        }
        if raw.description.len() > 1024 {
            return Err(bad(FieldError::DescriptionLength));
        }
        let docs = raw.tools.values().flat_map(|t| {
            t.description
                .iter()
                .map(|d| ("tools.<function>.description", d))
                .chain(t.params.values().map(|d| ("tools.<function>.params", d)))
        });
        for (field, text) in docs {
            if text.len() > 1024 {
                return Err(bad(FieldError::DescriptionLength));
            }
            if let Some(c) = text
                .chars()
                .find(|c| (c.is_control() && *c != '\n' && *c != '\t') || invisible(*c))
            {
                return Err(bad(FieldError::Invisible {
                    field,
                    code: c as u32,
                }));
            }
        }
        for (field, text) in [("version", &raw.version), ("description", &raw.description)] {
            if let Some(c) = text.chars().find(|c| c.is_control() || invisible(*c)) {
                return Err(bad(FieldError::Invisible {
                    field,
                    code: c as u32,
                }));
            }
        }
        let files = match raw.files.as_deref() {
            None => Files::None,
            Some(f) => Files::parse(f).map_err(bad)?,
        };
        let requested = Capabilities {
            files,
            network: raw.network,
            env: raw.env,
            http: raw.http,
        }
        .validated()
        .map_err(bad)?;
        raw.limits.apply(Limits::default()).map_err(bad)?;
        let hook = hook_points(raw.hook).map_err(bad)?;
        Ok(Manifest {
            name: raw.name,
            version: raw.version,
            wit,
            description: raw.description,
            requested,
            limits: raw.limits,
            tools: raw.tools,
            hook,
        })
    }

    /// The limits its calls run under.
    pub fn effective_limits(&self) -> Limits {
        self.limits
            .apply(Limits::default())
            .unwrap_or_else(|_| Limits::default())
    }
}

/// Whether `c` is a character that changes how text around it is shown without being seen itself:
/// bidirectional controls (which can make `exe.txt` read as `txt.exe`), zero-width characters and
/// other invisible format characters. Refused in everything a component says of itself.
pub fn invisible(c: char) -> bool {
    matches!(
        c as u32,
        0x00AD
            | 0x034F
            | 0x061C
            | 0x115F..=0x1160
            | 0x17B4..=0x17B5
            | 0x180B..=0x180F
            | 0x200B..=0x200F
            | 0x202A..=0x202E
            | 0x2060..=0x206F
            | 0x3164
            | 0xFE00..=0xFE0F
            | 0xFEFF
            | 0xFFA0
            | 0xFFF9..=0xFFFB
            | 0x1D173..=0x1D17A
            | 0xE0000..=0xE0FFF
    )
}

/// Checks a component name.
pub fn check_name(name: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name.len() <= MAX_NAME
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !name.contains("__")
        && !name.ends_with('_');
    if ok {
        Ok(())
    } else {
        Err(FieldError::Name {
            name: name.to_string(),
            max: MAX_NAME,
        })
    }
}

/// Checks an environment variable name.
pub fn check_env_name(name: &str) -> Result<(), FieldError> {
    let ok = !name.is_empty()
        && name.len() <= 128
        && name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(FieldError::Env(name.to_string()))
    }
}

/// Where a component and its manifest were found.
pub struct Located {
    /// The component file.
    pub wasm: PathBuf,
    /// The manifest, parsed.
    pub manifest: Manifest,
    /// Where the manifest came from, for people: a path or "the bb7-manifest custom section".
    pub manifest_origin: String,
}

/// Finds the component and its manifest for `bb7 tools add <path>`: a `.wasm` file (its manifest
/// beside it or in its custom section), or a directory holding `bb7-tool.toml` and exactly one
/// `.wasm`. When both a file and a section exist they must agree.
pub fn locate(path: &Path) -> Result<(Located, Vec<u8>), ComponentError> {
    match locate_optional(path)? {
        (wasm, bytes, Some((manifest, manifest_origin))) => Ok((
            Located {
                wasm,
                manifest,
                manifest_origin,
            },
            bytes,
        )),
        (wasm, _, None) => Err(ComponentError::NoManifest {
            wasm,
            file: MANIFEST_FILE,
            section: MANIFEST_SECTION,
        }),
    }
}

/// The component file, its bytes and its manifest (with where it came from), if it has one.
#[allow(clippy::type_complexity)]
pub fn locate_optional(
    path: &Path,
) -> Result<(PathBuf, Vec<u8>, Option<(Manifest, String)>), ComponentError> {
    let io = |e| ComponentError::io(path, e);
    let meta = std::fs::metadata(path).map_err(io)?;
    let wasm = if meta.is_dir() {
        let mut found = Vec::new();
        for e in std::fs::read_dir(path).map_err(io)? {
            let e = e.map_err(io)?;
            if e.path().extension().is_some_and(|x| x == "wasm") {
                found.push(e.path());
            }
        }
        match found.len() {
            1 => found.remove(0),
            0 => return Err(ComponentError::NoWasm(path.to_path_buf())),
            count => {
                return Err(ComponentError::ManyWasm {
                    path: path.to_path_buf(),
                    count,
                });
            }
        }
    } else {
        path.to_path_buf()
    };
    let bytes = read_component(&wasm).map_err(ComponentError::Read)?;
    let beside = wasm.parent().map(|d| d.join(MANIFEST_FILE));
    let file_manifest = match &beside {
        Some(p) if p.is_file() => {
            // A regular file of bounded size, read without blocking (never a FIFO or a device).
            let bytes = crate::store::read_regular_path(p).map_err(|e| ComponentError::io(p, e))?;
            let text =
                String::from_utf8(bytes).map_err(|_| ComponentError::ManifestNotUtf8(p.clone()))?;
            Some((
                Manifest::parse(&text, &p.display().to_string())?,
                p.display().to_string(),
            ))
        }
        _ => None,
    };
    let section = custom_section(&bytes)?
        .map(|text| {
            let text = String::from_utf8(text).map_err(|_| ComponentError::SectionNotUtf8 {
                section: MANIFEST_SECTION,
            })?;
            Manifest::parse(&text, &format!("the {MANIFEST_SECTION} custom section"))
        })
        .transpose()?;
    let found = match (file_manifest, section) {
        (Some((f, origin)), Some(s)) => {
            if f != s {
                return Err(ComponentError::ManifestsDisagree {
                    origin,
                    section: MANIFEST_SECTION,
                });
            }
            Some((f, origin))
        }
        (Some(found), None) => Some(found),
        (None, Some(s)) => Some((s, format!("the {MANIFEST_SECTION} custom section"))),
        (None, None) => None,
    };
    Ok((wasm, bytes, found))
}

/// The `bb7-manifest` custom section of a component, at any nesting level (a Rust `link_section`
/// lands in the core module the component wraps). More than one is an error.
pub fn custom_section(bytes: &[u8]) -> Result<Option<Vec<u8>>, ComponentError> {
    let mut found: Option<Vec<u8>> = None;
    for payload in wasmparser::Parser::new(0).parse_all(bytes) {
        let payload = payload.map_err(ComponentError::NotWasm)?;
        if let wasmparser::Payload::CustomSection(c) = payload
            && c.name() == MANIFEST_SECTION
        {
            if found.is_some() {
                return Err(ComponentError::ManySections {
                    section: MANIFEST_SECTION,
                });
            }
            found = Some(c.data().to_vec());
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = r#"
name = "wordcount"
version = "0.1.0"
wit = "0.1.0"
description = "Counts words."
files = "project-read"
network = ["api.example.com:443", "127.0.0.1:8080", "[::1]:80"]
env = ["LANG"]
[limits]
memory_mib = 64
"#;

    #[test]
    fn http_origins_are_normalised_sorted_and_deduplicated() {
        let text = format!(
            "http = [\"https://b.example:443/\", \"HTTP://127.0.0.1:8080\", \"https://b.example\"]\n{GOOD}"
        );
        let m = Manifest::parse(&text, "t").unwrap();
        assert_eq!(
            m.requested.http,
            vec!["http://127.0.0.1:8080", "https://b.example"]
        );
    }

    #[test]
    fn a_good_manifest_parses() {
        let m = Manifest::parse(GOOD, "t").unwrap();
        assert_eq!(m.name, "wordcount");
        assert_eq!(m.requested.files, Files::ProjectRead);
        assert_eq!(m.requested.network.len(), 3);
        assert_eq!(m.effective_limits().memory_bytes, 64 << 20);
    }

    #[test]
    fn bad_manifests_get_clear_errors() {
        let cases = [
            (GOOD.replace("description", "descripton"), "unknown field"),
            (
                GOOD.replace("api.example.com:443", "api.example.com"),
                "host:port",
            ),
            (
                GOOD.replace("api.example.com:443", "*.example.com:443"),
                "wildcards",
            ),
            (GOOD.replace("api.example.com:443", "a.b:0"), "port"),
            (
                GOOD.replace("api.example.com:443", "127.1:80"),
                "dotted IPv4",
            ),
            (
                GOOD.replace("api.example.com:443", "2130706433:80"),
                "dotted IPv4",
            ),
            (
                GOOD.replace("api.example.com:443", "0x7f.1:80"),
                "dotted IPv4",
            ),
            (GOOD.replace("api.example.com:443", "::1:80"), "brackets"),
            (
                GOOD.replace("Counts words.", "Counts\\u001b[8m words."),
                "description must not contain control",
            ),
            (
                GOOD.replace("api.example.com:443", "0x7f.0x1:80"),
                "dotted IPv4",
            ),
            (
                GOOD.replace("Counts words.", "Counts \\u202Etxt.exe words."),
                "description must not contain control, bidirectional",
            ),
            (
                GOOD.replace("Counts words.", "Counts\\u200B words."),
                "U+200B",
            ),
            (GOOD.replace("api.example.com:443", "a.b:99999"), "port"),
            (
                format!("http = [\"https://api.example.com/v1\"]\n{GOOD}"),
                "no path",
            ),
            (
                format!("http = [\"https://*.example.com\"]\n{GOOD}"),
                "wildcards",
            ),
            (
                format!("http = [\"ftp://example.com\"]\n{GOOD}"),
                "http or https",
            ),
            (
                GOOD.replace("wit = \"0.1.0\"", "wit = \"9.0.0\""),
                "not a contract version",
            ),
            (GOOD.replace("\"wordcount\"", "\"Word\""), "must be 1 to"),
            (GOOD.replace("\"wordcount\"", "\"a__b\""), "must be 1 to"),
            (GOOD.replace("LANG", "A-B"), "env entry"),
            (GOOD.replace("project-read", "everything"), "files must be"),
            (
                GOOD.replace("memory_mib = 64", "memory_mib = 4096"),
                "memory_mib",
            ),
            (GOOD.replace("memory_mib = 64", "cpu = 1"), "unknown field"),
            // A syntax error names the line, never quotes it.
            (
                format!("{GOOD}\nhttps://alice:SECRET@github.com\n"),
                "line ",
            ),
        ];
        for (text, want) in cases {
            let e = Manifest::parse(&text, "t").unwrap_err().to_string();
            assert!(e.contains(want), "{want:?} not in {e:?}");
            assert!(!e.contains("SECRET"), "{e:?}");
        }
    }

    #[test]
    fn hook_points_are_checked_and_ordered() {
        let m = Manifest::parse(
            &format!("{GOOD}hook = [\"pre_apply\", \"pre_send\", \"pre_apply\"]\n")
                .replace("[limits]\nmemory_mib = 64\n", "")
                .replace("wit = \"0.1.0\"\n", ""),
            "t",
        )
        .unwrap();
        assert_eq!(m.hook, vec!["pre_send", "pre_apply"]);
        for bad in ["hook = [\"on_save\"]", "hook = []"] {
            let text = format!("name = \"h\"\nversion = \"1\"\n{bad}\n");
            let e = Manifest::parse(&text, "t").unwrap_err().to_string();
            assert!(e.contains("hook points"), "{e}");
        }
        assert!(Manifest::parse(GOOD, "t").unwrap().hook.is_empty());
    }

    #[test]
    fn excess_names_each_widening() {
        let req = Capabilities {
            files: Files::ProjectRead,
            network: vec!["a.b:1".into()],
            env: vec![],
            http: vec!["https://a.b".into()],
        };
        let wider = Capabilities {
            files: Files::OutputWrite,
            network: vec!["a.b:1".into(), "c.d:2".into()],
            env: vec!["HOME".into()],
            http: vec!["https://a.b".into(), "http://a.b".into()],
        };
        assert!(req.within(&req));
        assert_eq!(
            wider.excess(&req),
            vec![
                "files = output-write",
                "network c.d:2",
                "env HOME",
                "http http://a.b"
            ]
        );
        assert!(Capabilities::default().within(&req));
    }
}
