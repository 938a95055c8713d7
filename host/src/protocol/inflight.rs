//! The one model request a process runs at a time (PROTOCOL-ADDENDUM: "Only one `send` is in
//! flight per process"), and how `cancel` reaches it.

use std::sync::Mutex;

use tokio::sync::watch;

/// The message for a second `send`, and for actions that would change the chat under a running one.
pub const BUSY: &str = "Another request is already in progress";

struct Current {
    request_id: Option<String>,
    cancel: watch::Sender<bool>,
}

/// The in-flight slot.
#[derive(Default)]
pub struct InFlight {
    current: Mutex<Option<Current>>,
}

/// A reply is already in flight; the text is [`BUSY`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}", BUSY)]
pub struct Busy;

impl InFlight {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Current>> {
        self.current.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the slot for `request_id`; the receiver turns `true` on cancel.
    pub fn claim(&self, request_id: Option<&str>) -> Result<watch::Receiver<bool>, Busy> {
        let mut cur = self.lock();
        if cur.is_some() {
            return Err(Busy);
        }
        let (tx, rx) = watch::channel(false);
        *cur = Some(Current {
            request_id: request_id.map(str::to_string),
            cancel: tx,
        });
        Ok(rx)
    }

    /// Frees the slot (before the terminal event is written, so the client may send again at once).
    pub fn release(&self) {
        *self.lock() = None;
    }

    /// Whether a request holds the slot.
    pub fn busy(&self) -> bool {
        self.lock().is_some()
    }

    /// Cancels the request in flight when it is `target` (or any, without a target). Returns whether
    /// there was one to cancel.
    pub fn cancel(&self, target: Option<&str>) -> bool {
        let cur = self.lock();
        match cur.as_ref() {
            Some(c) if target.is_none() || target == c.request_id.as_deref() => {
                let _ = c.cancel.send(true);
                true
            }
            _ => false,
        }
    }
}

/// Actions that would change the active chat or its files: refused while a `send` runs.
pub fn refused_while_busy(action: &str) -> bool {
    matches!(
        action,
        "send"
            | "chat_new"
            | "chat_select"
            | "chat_delete"
            | "chat_edit"
            | "fork_chat"
            | "chat_new_with_context"
            | "chat_move"
            | "save_chat_settings"
            | "add_system_message"
            | "context_add"
            | "context_add_section"
            | "context_update"
            | "context_remove"
            | "context_remove_section"
            | "context_set_readonly"
            | "sync_context"
            | "apply_file"
            | "apply_file_as"
            | "output_delete"
            | "diff_local_done"
            | "get_hunks"
            | "apply_hunks"
            | "reject_hunks"
            | "checkpoint_rollback"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_at_a_time_and_cancel_by_id() {
        let f = InFlight::default();
        let rx = f.claim(Some("7")).unwrap();
        assert_eq!(f.claim(Some("8")).unwrap_err().to_string(), BUSY);
        assert!(!f.cancel(Some("8")));
        assert!(!*rx.borrow());
        assert!(f.cancel(Some("7")));
        assert!(*rx.borrow());
        f.release();
        assert!(!f.busy());
        assert!(!f.cancel(None));
    }
}
