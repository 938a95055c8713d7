//! A hook's `decide` run on the caller's thread, for a hook granted nothing (no directory, no
//! network, no environment, no `wasi:http`) — the usual policy hook, which decides on the event alone.
//!
//! Tool calls run on a worker thread ([`crate::sandbox::watchdog`]) because a host call can block
//! in a system call (opening a FIFO in a granted directory, a socket) where the epoch cannot stop
//! it. A hook granted nothing has no such host call: no preopened directory, sockets and name
//! lookups refused, stdin empty, and every wait it can start (a sleep, a poll) ends at the call's
//! deadline (`sandbox/hostcalls.rs`). So its guest code is all there is to stop, and the epoch
//! deadline does, on any thread. Everything else is as for a tool call: a fresh store and instance
//! per decision (nothing carried over), the component's memory limit, its wall-time deadline, the
//! reply's cancellation, and the same classification of every way it can fail.

use serde_json::Value;

use crate::sandbox::grant::CallCaps;
use crate::sandbox::state::{new_store, wasi_ctx};
use crate::sandbox::{CallError, Sandbox, ToolComponent};

/// Whether a call with `caps` of `tool` can run on the caller's thread (see the module): nothing
/// granted, and no `wasi:http` linked.
pub(super) fn inline_safe(caps: &CallCaps, http_linked: bool) -> bool {
    caps.dir.is_none()
        && caps.network.is_empty()
        && caps.env.is_empty()
        && caps.http.is_empty()
        && !http_linked
}

/// Calls `decide` (a function of a loaded hook) with `arguments` in a fresh store on this thread,
/// under `tool`'s limits (else the sandbox's): the JSON result, or why there is none.
pub(super) fn call_inline(
    sandbox: &Sandbox,
    decide: &ToolComponent,
    caps: &CallCaps,
    arguments: &str,
) -> Result<Value, CallError> {
    let limits = decide.limits.unwrap_or(*sandbox.limits());
    let cancel = crate::sandbox::cancel::current();
    if cancel.as_ref().is_some_and(|c| c.is_cancelled()) {
        return Err(CallError::Cancelled);
    }
    let wasi = wasi_ctx(caps, None)?;
    let mut store = new_store(sandbox.registry().engine(), &limits, wasi, None);
    crate::sandbox::cancel::arm(&mut store, &limits, cancel.as_ref(), None);
    let json = match decide.pre.call(&mut store, &[], arguments) {
        Ok(Ok(json)) => json,
        Ok(Err(f)) => return Err(CallError::Tool(f)),
        Err(_) if cancel.as_ref().is_some_and(|c| c.is_cancelled()) => {
            return Err(CallError::Cancelled);
        }
        Err(e) => return Err(crate::sandbox::runner::classify(&store, &limits, e)),
    };
    if json.len() > limits.result_bytes {
        return Err(CallError::ResultTooLarge {
            size: json.len(),
            limit: limits.result_bytes,
        });
    }
    serde_json::from_str::<Value>(&json).map_err(|e| CallError::BadResult(e.to_string()))
}

#[cfg(test)]
#[path = "../../../tests/common/wasm.rs"]
mod test_wasm;

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use crate::sandbox::grant::{Access, CallCaps};
    use crate::sandbox::hook_engine::engine;
    use crate::sandbox::{CallError, Limits, Sandbox};

    /// The test hook `<name>` of `examples/hooks`, loaded on a sandbox over the hook engine, and
    /// a decision of it made on this thread (as `hooks::exec` makes one).
    fn hook(name: &str) -> impl Fn() -> Result<serde_json::Value, CallError> {
        let wasm = super::test_wasm::build(
            "examples/hooks",
            "hook-examples-wasm",
            &format!("{name}.wasm"),
        );
        let sandbox =
            Sandbox::with_engine(engine().unwrap(), Limits::default(), None, None, &[]).unwrap();
        let component = Arc::new(
            sandbox
                .registry()
                .load_file(name, &wasm, Access::ReadOnly)
                .unwrap(),
        );
        let decide = super::super::run::decide_function(&component).unwrap();
        let args = json!({"event": "{\"point\":\"pre_send\"}"}).to_string();
        move || super::call_inline(&sandbox, &decide, &CallCaps::none(), &args)
    }

    #[test]
    fn no_decision_finds_what_an_earlier_one_left_in_memory() {
        // hook_once marks its memory when it decides and denies when it finds the mark.
        let decide = hook("hook_once");
        for i in 0..40 {
            assert_eq!(decide().unwrap(), json!({"tag": "pass"}), "decision {i}");
        }
    }
}
