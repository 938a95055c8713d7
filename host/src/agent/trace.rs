//! The trace of one agent job: `.bb7/chats/<id>/traces/<job>.jsonl`, one JSON line per event with,
//! for tool calls, the component's sha256, its grants, the duration and the bytes returned, and the
//! exact text the model was given, so a reviewer can replay what the model saw.

use std::io::Write;

use cap_std::fs::{Dir, OpenOptions};
use serde_json::Value;

/// An open trace file; writing is best effort (a trace that cannot be written never fails a reply).
pub struct Trace {
    file: Option<std::fs::File>,
}

impl Trace {
    /// Opens `traces/<job_id>.jsonl` under the chat directory `chat_dir`, creating `traces/`.
    pub fn open(chat_dir: &Dir, job_id: &str) -> Trace {
        let file = chat_dir
            .create_dir_all("traces")
            .and_then(|_| {
                let mut o = OpenOptions::new();
                o.create(true).append(true);
                chat_dir.open_with(format!("traces/{job_id}.jsonl"), &o)
            })
            .map(|f| f.into_std());
        if let Err(e) = &file {
            tracing::warn!("cannot open the trace of job {job_id}: {e}");
        }
        Trace { file: file.ok() }
    }

    /// A trace that records nothing.
    pub fn none() -> Trace {
        Trace { file: None }
    }

    /// Appends one line.
    pub fn line(&mut self, v: &Value) {
        if let Some(f) = &mut self.file {
            let mut s = v.to_string();
            s.push('\n');
            if let Err(e) = f.write_all(s.as_bytes()) {
                tracing::warn!("cannot append to a trace: {e}");
                self.file = None;
            }
        }
    }
}
