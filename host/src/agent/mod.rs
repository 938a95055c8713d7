//! The reply loop: one assistant reply with its tool calls.
//!
//! - [`staging`]: the reply's private staging directory, the edit tools' only capability.
//! - [`tools`]: which tools are offered, and running each call against staging with EDITS.md's rules.
//! - [`request`]: the request bodies of a reply (first attempt and hidden retry).
//! - [`reply`]: stream → tool calls → commit all or nothing → [`reply::ReplyOutcome`].
//! - [`steps`]: agent mode, the multi-step loop; [`retrieval`] its read-only project tools,
//!   [`clarify`] its questions to the user, [`events`] and [`trace`] what it reports (its limits and
//!   deny list live in [`crate::config::agent`]); [`third_party`] the installed components it may offer.

pub mod clarify;
pub mod events;
pub mod mode;
pub mod reply;
pub mod request;
pub mod retrieval;
pub mod staging;
pub mod steps;
pub mod third_party;
pub mod tools;
pub mod trace;
pub mod usage_log;

pub use reply::{Ending, ReplyJob, ReplyOutcome, ReplySink};
pub use request::RequestBuilder;
