//! `netprobe`: an example of a component whose code opens sockets but whose manifest requests no
//! network.
//!
//! Its one tool, `probe_port`, opens a TCP connection with `std::net::TcpStream::connect`, so the
//! built component imports `wasi:sockets/*` (and `wasi:sockets/ip-name-lookup` to resolve the host
//! name). Its manifest (`bb7-tool.toml`) requests no network, so bb7 links those interfaces with
//! every operation denied: it installs, and every connection it tries fails. To let it connect,
//! declare the destinations in the manifest, e.g. `network = ["example.com:443"]`; then it can
//! connect to exactly those host:port pairs once the user grants them.
//!
//! Arguments: `{"host": "<name or IP address>", "port": <1-65535>}`.
//! Result: `{"host", "port", "open": bool, "peer"?, "error"?}`.

wit_bindgen::generate!({
    path: "../../../wit/v0.1.0",
    world: "tool-component",
});

use std::io::ErrorKind as IoKind;
use std::net::TcpStream;

use bb7::tool::types::ErrorKind;
use exports::bb7::tool::tool::{Guest, Setting, ToolError, ToolInfo};
use serde_json::{Value, json};

/// The manifest, embedded as the custom section `bb7-manifest` (see word-count).
const MANIFEST_LEN: usize = include_bytes!("../bb7-tool.toml").len();
#[unsafe(link_section = "bb7-manifest")]
#[used]
static MANIFEST: [u8; MANIFEST_LEN] = *include_bytes!("../bb7-tool.toml");

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "host": {"type": "string", "description": "A host name or IP address."},
    "port": {"type": "integer", "minimum": 1, "maximum": 65535}
  },
  "required": ["host", "port"],
  "additionalProperties": false
}"#;

struct NetProbe;

impl Guest for NetProbe {
    fn describe(_settings: Vec<Setting>) -> Result<ToolInfo, ToolError> {
        Ok(ToolInfo {
            name: "probe_port".into(),
            description: "Checks whether a TCP port on a host accepts connections.".into(),
            parameters_schema: SCHEMA.into(),
        })
    }

    fn call(_settings: Vec<Setting>, arguments: String) -> Result<String, ToolError> {
        let args: Value = serde_json::from_str(&arguments).map_err(|e| {
            err(
                ErrorKind::InvalidArguments,
                format!("arguments are not JSON: {e}"),
            )
        })?;
        let host = args["host"]
            .as_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidArguments,
                    "`host` must be a non-empty string",
                )
            })?;
        let port = args["port"]
            .as_u64()
            .filter(|p| (1..=65535).contains(p))
            .ok_or_else(|| {
                err(
                    ErrorKind::InvalidArguments,
                    "`port` must be an integer from 1 to 65535",
                )
            })? as u16;
        let out = match TcpStream::connect((host, port)) {
            Ok(stream) => {
                let peer = stream
                    .peer_addr()
                    .map(|a| a.to_string())
                    .unwrap_or_default();
                json!({"host": host, "port": port, "open": true, "peer": peer})
            }
            Err(e) if matches!(e.kind(), IoKind::ConnectionRefused | IoKind::TimedOut) => {
                json!({"host": host, "port": port, "open": false, "error": e.to_string()})
            }
            Err(e) if e.kind() == IoKind::PermissionDenied => {
                return Err(err(
                    ErrorKind::PermissionDenied,
                    format!("connecting to {host}:{port} is not granted: {e}"),
                ));
            }
            Err(e) => {
                return Err(err(
                    ErrorKind::Io,
                    format!("connecting to {host}:{port}: {e}"),
                ));
            }
        };
        Ok(out.to_string())
    }
}

export!(NetProbe);

fn err(kind: ErrorKind, message: impl Into<String>) -> ToolError {
    ToolError {
        kind,
        message: message.into(),
    }
}
