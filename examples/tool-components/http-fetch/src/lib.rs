//! `httpfetch`: an example of a component that speaks HTTP through `wasi:http`.
//!
//! Its one tool, `fetch_url`, sends a GET with `wasi:http/outgoing-handler` and returns the status
//! and the body as text. `wasi:http` does not follow redirects, so the tool does: each hop is a new
//! request, which bb7 checks against the granted origins like the first. A request to an origin
//! that is not granted fails with the error code `HTTP-request-denied`; a body larger than the
//! component's result limit fails with `HTTP-response-body-size`.
//!
//! The manifest (`bb7-tool.toml`) lies beside the binary, not embedded: a user points it at the
//! origins they mean to allow.
//!
//! Arguments: `{"url": "http(s)://host[:port]/path?query"}`.
//! Result: `{"url", "status", "redirects": [..], "body"}`.

wit_bindgen::generate!({
    path: "../../../wit/v0.1.0",
    world: "tool-component",
});

use bb7::tool::types::ErrorKind;
use exports::bb7::tool::tool::{Guest, Setting, ToolError, ToolInfo};
use serde_json::{Value, json};
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingBody, Method, OutgoingRequest, Scheme};
use wasip2::io::streams::StreamError;

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {
    "url": {"type": "string", "description": "An http:// or https:// URL."}
  },
  "required": ["url"],
  "additionalProperties": false
}"#;

/// Redirects followed before giving up.
const MAX_REDIRECTS: usize = 5;

struct HttpFetch;

impl Guest for HttpFetch {
    fn describe(_settings: Vec<Setting>) -> Result<ToolInfo, ToolError> {
        Ok(ToolInfo {
            name: "fetch_url".into(),
            description: "Fetches a URL with an HTTP GET and returns its status and body as text. Only the origins the user granted can be reached.".into(),
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
        let Some(url) = args["url"].as_str() else {
            return Err(err(
                ErrorKind::InvalidArguments,
                "url must be a string".into(),
            ));
        };
        let mut url = Url::parse(url)?;
        let mut redirects = Vec::new();
        loop {
            let (status, location, body) = get(&url)?;
            match location {
                Some(loc) if (300..400).contains(&status) => {
                    if redirects.len() == MAX_REDIRECTS {
                        return Err(err(
                            ErrorKind::Io,
                            format!("more than {MAX_REDIRECTS} redirects"),
                        ));
                    }
                    url = url.join(&loc)?;
                    redirects.push(url.to_string());
                }
                _ => {
                    return Ok(json!({
                        "url": url.to_string(),
                        "status": status,
                        "redirects": redirects,
                        "body": String::from_utf8_lossy(&body),
                    })
                    .to_string());
                }
            }
        }
    }
}

/// One GET: the status, the `location` header and the body.
fn get(url: &Url) -> Result<(u16, Option<String>, Vec<u8>), ToolError> {
    let failed = |what: &str| err(ErrorKind::Io, format!("GET {url}: {what}"));
    let req = OutgoingRequest::new(Fields::new());
    req.set_method(&Method::Get)
        .map_err(|()| failed("bad method"))?;
    let scheme = if url.https {
        Scheme::Https
    } else {
        Scheme::Http
    };
    req.set_scheme(Some(&scheme))
        .map_err(|()| failed("bad scheme"))?;
    req.set_authority(Some(&url.authority))
        .map_err(|()| failed("bad authority"))?;
    req.set_path_with_query(Some(&url.path))
        .map_err(|()| failed("bad path"))?;
    let pending = outgoing_handler::handle(req, None).map_err(|c| code_error(url, c))?;
    pending.subscribe().block();
    let resp = match pending.get() {
        Some(Ok(Ok(r))) => r,
        Some(Ok(Err(c))) => return Err(code_error(url, c)),
        _ => return Err(failed("no response")),
    };
    let status = resp.status();
    let location = resp
        .headers()
        .get("location")
        .into_iter()
        .next()
        .map(|v| String::from_utf8_lossy(&v).into_owned());
    let body = resp.consume().map_err(|()| failed("no body"))?;
    let stream = body.stream().map_err(|()| failed("no body stream"))?;
    let mut bytes = Vec::new();
    loop {
        match stream.blocking_read(64 * 1024) {
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => break,
            Err(StreamError::LastOperationFailed(e)) => {
                // wasmtime's wasi:http reports a failure inside the body as an I/O error whose
                // text says what happened (http-error-code gives none for it).
                let text = e.to_debug_string();
                return Err(match wasip2::http::types::http_error_code(&e) {
                    Some(c) => code_error(url, c),
                    None if text.contains("body size exceeds limit") => err(
                        ErrorKind::TooLarge,
                        format!("GET {url}: HTTP-response-body-size ({text})"),
                    ),
                    None => failed(&text),
                });
            }
        }
    }
    drop(stream);
    let _ = IncomingBody::finish(body);
    Ok((status, location, bytes))
}

/// A wasi:http error code as a tool error: a denied origin is `permission-denied`, a body over
/// the limit `too-large`.
fn code_error(url: &Url, code: ErrorCode) -> ToolError {
    let kind = match code {
        ErrorCode::HttpRequestDenied => ErrorKind::PermissionDenied,
        ErrorCode::HttpResponseBodySize(_) => ErrorKind::TooLarge,
        _ => ErrorKind::Io,
    };
    let why = match code {
        ErrorCode::HttpRequestDenied => {
            "HTTP-request-denied (HttpRequestDenied): the origin is not granted".to_string()
        }
        ErrorCode::HttpResponseBodySize(n) => format!(
            "HTTP-response-body-size (HttpResponseBodySize {n:?}): the response is larger than the component may receive"
        ),
        other => format!("{other:?}"),
    };
    err(kind, format!("GET {url}: {why}"))
}

/// The parts of an http(s) URL a request needs.
struct Url {
    https: bool,
    authority: String,
    /// The path and query, starting with `/`.
    path: String,
}

impl Url {
    fn parse(s: &str) -> Result<Url, ToolError> {
        let bad = || {
            err(
                ErrorKind::InvalidArguments,
                format!("{s:?} is not an http:// or https:// URL"),
            )
        };
        let (https, rest) = if let Some(r) = s.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = s.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad());
        };
        let cut = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        if authority.is_empty() {
            return Err(bad());
        }
        let path = match path {
            "" => "/".to_string(),
            p if p.starts_with('?') => format!("/{p}"),
            p => p.to_string(),
        };
        Ok(Url {
            https,
            authority: authority.to_string(),
            path,
        })
    }

    /// A `location` header resolved against this URL (absolute, or a path on the same origin).
    fn join(&self, location: &str) -> Result<Url, ToolError> {
        if location.starts_with('/') && !location.starts_with("//") {
            return Ok(Url {
                https: self.https,
                authority: self.authority.clone(),
                path: location.to_string(),
            });
        }
        Url::parse(location)
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = if self.https { "https" } else { "http" };
        write!(f, "{scheme}://{}{}", self.authority, self.path)
    }
}

fn err(kind: ErrorKind, message: String) -> ToolError {
    ToolError { kind, message }
}

export!(HttpFetch);
