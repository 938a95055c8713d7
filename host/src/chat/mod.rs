//! The chat domain: the chat.json model, where files live in a chat directory, and the set of chats
//! in a store. Protocol handlers compose these; nothing here knows about JSON lines.

pub mod external;
pub mod model;
pub mod paths;
pub mod search;
pub mod snapshots;
pub mod store;

pub mod checkpoints;
pub mod hunks;
pub mod projfs;
pub mod review;
