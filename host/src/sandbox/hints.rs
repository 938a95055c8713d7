//! Errors that say what to do: the whole cause chain of a compile or trap error, and, for the
//! failures a component author meets with the mainstream toolchains, the fix.

/// An error's whole cause chain (`e.chain()` of a `wasmtime::Error` or an `anyhow::Error`) on one
/// line (`outer: cause: root`), without wasmtime's multi-line wasm backtrace context (the frames
/// name offsets, not causes).
pub fn chain<'a>(
    causes: impl IntoIterator<Item = &'a (dyn std::error::Error + 'static)>,
) -> String {
    chain_of(causes.into_iter().map(|c| c.to_string()))
}

/// [`chain`] of causes already turned into text, outermost first (`bb7-compile` reports them so).
pub fn chain_of(causes: impl IntoIterator<Item = impl AsRef<str>>) -> String {
    let mut parts: Vec<String> = Vec::new();
    for cause in causes {
        let text = cause.as_ref();
        let text = if text.contains("wasm backtrace:") {
            // "error while executing at wasm backtrace:\n 0: …": keep the sentence, drop frames.
            match text.split_once(" at wasm backtrace") {
                Some((head, _)) => head.trim().to_string(),
                None => continue,
            }
        } else {
            text.split_whitespace().collect::<Vec<_>>().join(" ")
        };
        if !text.is_empty() && !parts.iter().any(|p| p.contains(&text)) {
            parts.push(text);
        }
    }
    parts.join(": ")
}

/// The fix for a known failure whose cause chain is `chain`, if it is one.
pub fn fix_for(chain: &str) -> Option<&'static str> {
    let lower = chain.to_ascii_lowercase();
    if lower.contains("async")
        && (lower.contains("feature")
            || lower.contains("not enabled")
            || lower.contains("requires"))
    {
        return Some(
            "the component uses the component-model async ABI, which bb7 does not run: build it with the sync ABI (componentize-qjs: --sync; componentize-js/jco: no async exports or imports)",
        );
    }
    None
}

/// `chain` followed by its fix, when it is a known failure.
pub fn explained(chain: String) -> String {
    match fix_for(&chain) {
        Some(fix) => format!("{chain} ({fix})"),
        None => chain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chain_keeps_every_cause_and_drops_backtrace_frames() {
        let e = anyhow::anyhow!("wasm trap: wasm `unreachable` instruction executed")
            .context("error while executing at wasm backtrace:\n    0: 0x1234 - f\n    1: 0x99 - g")
            .context("calling the tool");
        assert_eq!(
            chain(e.chain()),
            "calling the tool: error while executing: wasm trap: wasm `unreachable` instruction executed"
        );
    }

    #[test]
    fn the_async_abi_names_the_sync_build() {
        let s = explained(
            "failed to parse WebAssembly module: `subtask.drop` requires the component model async feature".into(),
        );
        assert!(s.contains("--sync"), "{s}");
        assert_eq!(explained("out of fuel".into()), "out of fuel");
    }
}
