//! HTTP behind a grant: the origins a manifest may request (`http = ["https://api.example.com",
//! …]`), checked and normalised once here for manifests, grants and the call; and the request hook
//! of `wasi:http/outgoing-handler` ([`HttpGuard`]), which lets a request through only to a
//! **granted** origin, keeps its response inside the call's limits, and records every other
//! request as a refusal in the audit chain.
//!
//! `wasi:http` does not follow redirects (the guest does, with a new request), so every hop of a
//! redirect comes through [`HttpGuard`] and is checked the same way; nothing host-side follows one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use http_body_util::BodyExt as _;
use wasmtime_wasi_http::{Error as HttpError, RequestOptions, WasiBody, WasiHttpHooks};

use super::audit::{AuditLog, CallRefusals};
use super::grant::check_host_port;

/// Why an `http` origin (in a manifest or a grant) is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("http origin {entry:?}: {why}")]
pub struct OriginError {
    /// The origin as given.
    pub entry: String,
    /// What is wrong with it.
    pub why: &'static str,
}

/// Checks an origin (`http://` or `https://`, a host — DNS name, IPv4 address or bracketed IPv6
/// address — and an optional port; no path, query, fragment, user information or wildcard) and
/// returns it normalised: scheme and host in lower case, the scheme's default port dropped, no
/// trailing `/` (`HTTPS://API.Example.com:443/` → `https://api.example.com`).
pub fn normalize_origin(entry: &str) -> Result<String, OriginError> {
    let bad = |why: &'static str| OriginError {
        entry: entry.to_string(),
        why,
    };
    let (scheme, rest) = entry
        .split_once("://")
        .ok_or_else(|| bad("must be scheme://host[:port], e.g. https://api.example.com"))?;
    let scheme = scheme.to_ascii_lowercase();
    let default_port = match scheme.as_str() {
        "http" => 80,
        "https" => 443,
        _ => return Err(bad("the scheme must be http or https")),
    };
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if rest.contains(['/', '?', '#']) {
        return Err(bad("an origin has no path, query or fragment"));
    }
    if rest.contains('@') {
        return Err(bad("an origin has no user information (user@)"));
    }
    if rest.contains('*') {
        return Err(bad("no wildcards: name each origin"));
    }
    let (host, port) = split_host_port(rest).ok_or_else(|| bad("the port must be 1 to 65535"))?;
    let host = host.to_ascii_lowercase();
    let port = port.unwrap_or(default_port);
    check_host_port(&format!("{host}:{port}")).map_err(|e| bad(e.why))?;
    Ok(if port == default_port {
        format!("{scheme}://{host}")
    } else {
        format!("{scheme}://{host}:{port}")
    })
}

/// `host[:port]` (IPv6 in brackets); `None` when the port is not a number from 1 to 65535.
fn split_host_port(s: &str) -> Option<(&str, Option<u16>)> {
    let (host, port) = if s.starts_with('[') {
        match s.find(']') {
            Some(end) => (&s[..=end], s[end + 1..].strip_prefix(':')),
            None => (s, None),
        }
    } else {
        match s.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (s, None),
        }
    };
    match port {
        None => Some((host, None)),
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 && p == n.to_string() => Some((host, Some(n))),
            _ => None,
        },
    }
}

/// The normalised origin a request goes to, as [`normalize_origin`] writes it; `None` when the
/// request has no scheme or host bb7 could check, or an authority that is not exactly
/// `host[:port]` (user information, `x@host`, is used for the connection but is not the host the
/// check would read), so it is denied.
pub fn request_origin(uri: &http::Uri) -> Option<String> {
    if uri.authority()?.as_str().contains('@') {
        return None;
    }
    let scheme = uri.scheme_str()?;
    let host = uri.host()?;
    let text = match uri.port_u16() {
        Some(p) => format!("{scheme}://{host}:{p}"),
        None => format!("{scheme}://{host}"),
    };
    normalize_origin(&text).ok()
}

/// The `wasi:http` request hook of one call: requests only to the granted origins, each answer's
/// body at most `body_cap` bytes, and no wait past the call's deadline.
pub struct HttpGuard {
    /// The granted origins, normalised.
    origins: Arc<[String]>,
    /// Where denied requests are recorded: each distinct origin once per call (a component
    /// looping on denied requests must not flood the chain).
    refusals: Option<CallRefusals>,
    /// The largest response body a request may receive.
    body_cap: usize,
    /// When the call's wall time ends.
    deadline: Instant,
}

impl HttpGuard {
    /// A guard allowing `origins` (already normalised; empty: every request is denied), recording
    /// denials in `audit` for a call in `project` (when known). [`HttpGuard::bound`] sets its
    /// limits.
    pub fn new(
        origins: &[String],
        audit: Option<&AuditLog>,
        project: Option<&std::path::Path>,
    ) -> HttpGuard {
        HttpGuard {
            origins: origins.iter().cloned().collect(),
            refusals: audit.map(|log| CallRefusals::new(log.clone(), project, "http")),
            body_cap: 0,
            deadline: Instant::now(),
        }
    }

    /// Bounds every response to `body_cap` bytes of body and every wait to `deadline`.
    pub fn bound(&mut self, body_cap: usize, deadline: Instant) {
        self.body_cap = body_cap;
        self.deadline = deadline;
    }

    /// Whether a request to `origin` is allowed (recording each distinct denied origin once).
    fn allow(&mut self, method: &http::Method, origin: Option<&str>) -> bool {
        if origin.is_some_and(|o| self.origins.iter().any(|g| g == o)) {
            return true;
        }
        if let Some(refusals) = &mut self.refusals {
            let to = origin.unwrap_or("a request without a checkable origin");
            refusals.record(to, &format!("{method} {to}: origin not granted"));
        }
        false
    }
}

/// What [`WasiHttpHooks::send_request`] returns.
type Sent = Box<
    dyn Future<
            Output = Result<
                (
                    http::Response<WasiBody>,
                    Box<dyn Future<Output = Result<(), HttpError>> + Send>,
                ),
                HttpError,
            >,
        > + Send,
>;

impl WasiHttpHooks for HttpGuard {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = Result<(), HttpError>> + Send>,
    ) -> Sent {
        let origin = request_origin(request.uri());
        if !self.allow(request.method(), origin.as_deref()) {
            return Box::new(async { Err(HttpError::HttpRequestDenied) });
        }
        let left = self
            .deadline
            .saturating_duration_since(Instant::now())
            .max(Duration::from_millis(1));
        let within = |t: Option<Duration>| Some(t.map_or(left, |t| t.min(left)));
        let options = options.unwrap_or_default();
        let options = RequestOptions {
            connect_timeout: within(options.connect_timeout),
            first_byte_timeout: within(options.first_byte_timeout),
            between_bytes_timeout: within(options.between_bytes_timeout),
        };
        let cap = self.body_cap;
        Box::new(async move {
            let (res, io) =
                wasmtime_wasi_http::default_send_request(request, Some(options)).await?;
            let declared = res
                .headers()
                .get(http::header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse::<u64>().ok());
            if declared.is_some_and(|n| n > cap as u64) {
                return Err(HttpError::HttpResponseBodySize(declared));
            }
            let res = res.map(|body| capped(body, cap));
            Ok((
                res,
                Box::new(io) as Box<dyn Future<Output = Result<(), HttpError>> + Send>,
            ))
        })
    }
}

/// `body`, failing with `HTTP-response-body-size` once it passes `cap` bytes (a body that does not
/// say its length up front is cut there). wasmtime-wasi-http hands a failure inside a body to the
/// guest as a stream error whose text is the error's (`HTTP response body size exceeds limit:
/// <cap> bytes`); `http-error-code` gives no code for it.
fn capped(
    body: impl http_body::Body<Data = bytes::Bytes, Error = HttpError> + Send + 'static,
    cap: usize,
) -> WasiBody {
    http_body_util::Limited::new(body, cap)
        .map_err(move |e| match e.downcast::<HttpError>() {
            Ok(inner) => *inner,
            Err(_) => HttpError::HttpResponseBodySize(Some(cap as u64)),
        })
        .boxed_unsync()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_normalised_and_bad_ones_refused() {
        for (given, want) in [
            ("https://api.example.com", "https://api.example.com"),
            ("HTTPS://API.Example.com:443/", "https://api.example.com"),
            ("http://127.0.0.1:8080", "http://127.0.0.1:8080"),
            ("http://127.0.0.1:80", "http://127.0.0.1"),
            ("https://[::1]:8443", "https://[::1]:8443"),
            ("http://[::1]", "http://[::1]"),
        ] {
            assert_eq!(normalize_origin(given).as_deref(), Ok(want), "{given}");
        }
        for bad in [
            "api.example.com",
            "ftp://example.com",
            "https://example.com/path",
            "https://example.com?q=1",
            "https://example.com#x",
            "https://user:pw@example.com",
            "https://*.example.com",
            "https://example.com:0",
            "https://example.com:65536",
            "https://example.com:",
            "https://127.1",
            "https://",
            "http://::1",
        ] {
            assert!(normalize_origin(bad).is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn a_request_s_origin_is_read_as_a_grant_is_written() {
        let uri: http::Uri = "http://LOCALHOST:80/a?b".parse().unwrap();
        assert_eq!(request_origin(&uri).as_deref(), Some("http://localhost"));
        let uri: http::Uri = "https://[::1]:9000/".parse().unwrap();
        assert_eq!(request_origin(&uri).as_deref(), Some("https://[::1]:9000"));
        let uri: http::Uri = "/relative".parse().unwrap();
        assert_eq!(request_origin(&uri), None);
    }

    #[test]
    fn a_request_with_user_information_has_no_origin() {
        // The connection would go to the host after `@`, which the origin check must not skip.
        for given in [
            "http://x@127.0.0.1:8080/",
            "http://user:pw@127.0.0.1:8080/a",
            "http://127.0.0.1:8080@evil.example/",
        ] {
            let uri: http::Uri = given.parse().unwrap();
            assert_eq!(request_origin(&uri), None, "{given}");
        }
    }

    #[test]
    fn only_granted_origins_pass_and_an_empty_grant_passes_none() {
        let mut g = HttpGuard::new(&["http://127.0.0.1:8080".to_string()], None, None);
        let get = http::Method::GET;
        assert!(g.allow(&get, Some("http://127.0.0.1:8080")));
        assert!(!g.allow(&get, Some("http://127.0.0.1:8081")));
        assert!(!g.allow(&get, Some("https://127.0.0.1:8080")));
        assert!(!g.allow(&get, None));
        let mut none = HttpGuard::new(&[], None, None);
        assert!(!none.allow(&get, Some("http://127.0.0.1:8080")));
    }
}
