//! The chat domain: the chat.json model, where files live in a chat directory, the set of chats in
//! a store, and every operation on a chat — context, fork and edit, moving between stores, applying
//! the model's output, statuses, recording a turn, review and checkpoints. The protocol's handlers
//! parse a request, call these (through [`crate::workspace`] where the active chat or the stores
//! are involved) and shape the reply; nothing here knows about JSON lines.

pub mod apply;
pub mod checkpoints;
pub mod context;
pub mod error;
pub mod external;
pub mod fork;
pub mod hunks;
pub mod local;
pub mod model;
pub mod moving;
pub mod naming;
pub mod paths;
pub mod projfs;
pub mod review;
pub mod search;
pub mod snapshots;
pub mod statuses;
pub mod store;
pub mod turn;

pub use error::ChatError;
