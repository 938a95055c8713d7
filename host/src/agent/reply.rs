//! Running a reply: [`run`] takes a [`ReplyJob`] to its [`ReplyOutcome`] through the one loop of
//! [`super::steps`], run as the job's [`Policy`] says (chat mode: the edit tools, one step plus one
//! hidden repair attempt, no agent events; agent mode: the multi-step loop). Recording the result in
//! the chat is the caller's job ([`ReplyOutcome`] says everything it needs).

use super::events::ReplySink;
use super::job::{Policy, ReplyJob, ReplyOutcome};

/// Runs the reply.
pub async fn run(mut job: ReplyJob, sink: &mut dyn ReplySink) -> ReplyOutcome {
    let policy = Policy::of(&mut job);
    super::steps::run(job, policy, sink).await
}
