//! The reply loop: one assistant reply with its tool calls.
//!
//! - [`staging`]: the reply's private staging directory, the edit tools' only capability.
//! - [`tools`]: which tools are offered, and running each call against staging with EDITS.md's rules.
//! - [`request`]: the request bodies of a reply (first attempt and hidden retry).
//! - [`reply`]: stream → tool calls → commit all or nothing → [`reply::ReplyOutcome`].

pub mod reply;
pub mod request;
pub mod staging;
pub mod tools;

pub use reply::{Ending, ReplyJob, ReplyOutcome, ReplySink};
pub use request::RequestBuilder;
