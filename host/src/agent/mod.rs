//! The reply engine: one assistant reply with its tool calls, in chat mode or agent mode.
//!
//! - [`job`]: the types every part shares — [`ReplyJob`] (what a reply needs, set up by
//!   [`ReplyJob::prepare`] in [`prepare`]), the [`Policy`] a reply runs by, [`Ending`],
//!   [`ReplyOutcome`], [`AgentError`].
//! - [`reply`]: [`reply::run`], the entry point.
//! - [`steps`]: the one reply loop; chat mode is that loop with one step (plus one hidden repair
//!   attempt), the edit tools only and no job reported, as its [`Policy`] says. [`gate`] is its
//!   call gate (budget, loop detector), [`emit`] what it reports per call and at the end.
//! - [`stream`]: streaming one model request into the reply, and the commit.
//! - [`events`]: the [`ReplySink`] a reply streams to and the typed [`events::AgentEvent`]s.
//! - [`builtin`]: the built-in tools ([`builtin::BuiltinTool`]: name, kind, grant) defined once.
//! - [`tools`]: running edit calls against the reply's [`staging`] directory with EDITS.md's rules;
//!   [`retrieval`] the read-only project tools, [`clarify`] questions to the user,
//!   [`third_party`] the installed components offered (limits and deny list: [`crate::config::agent`]).
//! - [`request`]: the request bodies; [`trace`] and [`usage_log`] what is written down.
//!
//! Tools run on a [`crate::toolhost::ToolHost`], passed in with the job: nothing here owns a
//! sandbox.

pub mod builtin;
pub mod clarify;
pub mod emit;
pub mod error;
pub mod events;
pub mod gate;
pub mod hooked;
pub mod job;
pub mod mode;
pub mod plan;
pub mod plan_approval;
pub mod prepare;
pub mod reply;
pub mod request;
pub mod retrieval;
pub mod staging;
pub mod steps;
pub mod stream;
pub mod third_party;
pub mod tools;
pub mod trace;
pub mod usage_log;

pub use events::ReplySink;
pub use job::{AgentError, AgentJob, Ending, Policy, ReplyJob, ReplyOutcome, StepLimit};
pub use request::RequestBuilder;
