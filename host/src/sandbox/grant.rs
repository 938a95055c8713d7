//! Directory grants: the only filesystem capability a tool call receives; and the `host:port`
//! entries a network grant may name, checked here once for manifests, grants and the call's
//! socket check.

use std::net::IpAddr;
use std::path::PathBuf;

use serde::Serialize;

use super::error::HostPortError;

/// How a granted directory may be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read files and list directories; every mutation is refused.
    ReadOnly,
    /// Read, create, replace and delete files and directories inside the directory.
    ReadWrite,
}

impl Access {
    /// The access's name, as the audit writes it: `read-only` or `read-write`.
    pub fn as_str(self) -> &'static str {
        match self {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        }
    }
}

/// One directory handed to a call, mounted at `/` inside the component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// The host directory (canonicalised when the grant is made).
    pub path: PathBuf,
    /// How the call may use the directory.
    pub access: Access,
}

impl Grant {
    /// Grants `dir`, resolved to its canonical path so the audit record names the real directory.
    pub fn new(dir: impl Into<PathBuf>, access: Access) -> std::io::Result<Self> {
        let dir = dir.into();
        let path = dir.canonicalize()?;
        if !path.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotADirectory,
                format!("{} is not a directory", dir.display()),
            ));
        }
        Ok(Grant { path, access })
    }
}

/// Everything one call receives: at most one directory, and the network and environment its
/// component was granted (built-in tools: neither).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CallCaps {
    /// The directory mounted at `/`, if any.
    pub dir: Option<Grant>,
    /// `host:port` pairs the call may connect to over TCP.
    pub network: Vec<String>,
    /// Host environment variables the call may read.
    pub env: Vec<String>,
    /// Origins (normalised, `sandbox/http.rs`) the call's `wasi:http` requests may go to.
    pub http: Vec<String>,
}

impl CallCaps {
    /// Nothing at all (what `describe` gets).
    pub fn none() -> CallCaps {
        CallCaps::default()
    }

    /// One directory and nothing else (every built-in call).
    pub fn dir(grant: Grant) -> CallCaps {
        CallCaps {
            dir: Some(grant),
            ..CallCaps::default()
        }
    }
}

/// Checks a `host:port` network entry: a DNS name or an IP address (IPv6 in brackets), and a port
/// from 1 to 65535.
pub fn check_host_port(entry: &str) -> Result<(), HostPortError> {
    let bad = |why: &'static str| {
        Err(HostPortError {
            entry: entry.to_string(),
            why,
        })
    };
    let Some((host, port)) = entry.rsplit_once(':') else {
        return bad("must be host:port");
    };
    match port.parse::<u16>() {
        Ok(p) if p > 0 && port == p.to_string() => {}
        _ => return bad("the port must be a number from 1 to 65535"),
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        return match v6.parse::<std::net::Ipv6Addr>() {
            Ok(_) => Ok(()),
            Err(_) => bad("not an IPv6 address in brackets"),
        };
    }
    if host.contains(':') {
        return bad("an IPv6 address must be in brackets, e.g. [::1]:8080");
    }
    if host.parse::<IpAddr>().is_ok() {
        return Ok(());
    }
    // Numeric forms the resolver would still take as addresses (`127.1`, `2130706433`, `0x7f.1`,
    // `0x7f.0x1`, `017700000001`: any label in decimal, octal or hex) are neither a strict IP
    // address nor a name. A name's last label (its top-level domain) is never numeric.
    if host.rsplit('.').next().is_none_or(numeric_label) || host.split('.').all(numeric_label) {
        return bad(
            "the host must be a dotted IPv4 address, a bracketed IPv6 address or a DNS name",
        );
    }
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) || host.contains('*') {
        return bad("the host must be a DNS name or an IP address (no wildcards)");
    }
    Ok(())
}

/// Whether a `host:port` entry names its host by IP address (no name lookup needed).
pub fn is_ip_entry(entry: &str) -> bool {
    entry
        .rsplit_once(':')
        .map(|(h, _)| h.starts_with('[') || h.parse::<IpAddr>().is_ok())
        .unwrap_or(false)
}

/// Whether a host label reads as a number to the resolver (`inet_aton` takes each part in decimal,
/// octal with a leading 0, or hex with 0x): all digits, or `0x` and hex digits.
fn numeric_label(l: &str) -> bool {
    let hex = l
        .strip_prefix("0x")
        .or_else(|| l.strip_prefix("0X"))
        .map(|h| h.chars().all(|c| c.is_ascii_hexdigit()));
    hex.unwrap_or_else(|| !l.is_empty() && l.chars().all(|c| c.is_ascii_digit()))
}
