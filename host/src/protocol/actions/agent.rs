//! `clarify {question_id, answer}`: answers the agent's pending question (AGENT-PROTOCOL.md §1).
//! It never takes the session lock: the waiting reply holds nothing the answer needs.

use super::Handled;
use crate::protocol::ok;
use crate::protocol::request::Request;

pub fn clarify(req: &Request) -> Handled {
    let question_id = req.nonempty("question_id")?;
    let answer = req.str("answer")?;
    crate::agent::clarify::answer(question_id, answer).map_err(|e| e.to_string())?;
    Ok(ok())
}
