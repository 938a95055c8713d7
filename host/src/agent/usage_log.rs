//! The usage log: one line per reply in `~/.bb7/usage.jsonl` (best effort; a user's own record of
//! what each reply cost).

use std::io::Write;

use serde_json::json;

use super::job::ReplyOutcome;

/// Appends the line for a reply by `model` in chat `chat_id`.
pub fn append(chat_id: &str, global: bool, model: &str, o: &ReplyOutcome) {
    let Some(dir) = crate::paths::state_dir() else {
        return;
    };
    let line = json!({
        "timestamp": crate::chat::model::now(),
        "chat_id": chat_id,
        "global": global,
        "model": model,
        "outcome": o.ending.as_str(),
        "usage": o.usage,
        "duration": o.duration,
        "output_files": o.written.len(),
    });
    let result = std::fs::create_dir_all(&dir).and_then(|_| {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("usage.jsonl"))?;
        f.write_all(format!("{line}\n").as_bytes())
    });
    if let Err(e) = result {
        tracing::warn!("cannot append to the usage log: {e}");
    }
}
