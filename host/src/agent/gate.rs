//! The call gate of agent mode: before a call runs it must be within the reply's tool-call budget
//! and must not repeat a call already made (the loop detector). A refused call is not run; the
//! model reads why.

use std::collections::HashMap;

use crate::llm::tool_calls::ToolCall;

/// Whether a call may run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Run it.
    Run,
    /// Do not run it; the model reads this error.
    Refuse(String),
    /// The call repeats one made in step `first_step`: not run, and neither is the rest of its
    /// step (the model reads the error).
    Repeat {
        /// The step the call was first made in.
        first_step: usize,
        /// What the model reads.
        error: String,
    },
}

/// The budget and the loop detector of one agent reply.
pub struct CallGate {
    budget: usize,
    calls: usize,
    /// Calls made so far, by [`call_key`], with the step each was first made in.
    seen: HashMap<String, usize>,
    /// In the current step: the repeated call that stopped it, and its first step.
    repeated: Option<(String, usize)>,
    /// Whether repeated calls are refused (not in chat mode's one step).
    detect_repeats: bool,
}

impl CallGate {
    /// A gate for `budget` calls.
    pub fn new(budget: usize) -> CallGate {
        CallGate {
            budget,
            calls: 0,
            seen: HashMap::new(),
            repeated: None,
            detect_repeats: true,
        }
    }

    /// A gate that admits every call (chat mode: its one step runs all its calls, repeats too).
    pub fn unlimited() -> CallGate {
        CallGate {
            detect_repeats: false,
            ..CallGate::new(usize::MAX)
        }
    }

    /// The budget.
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// Calls counted so far (run or not, dropped ones included).
    pub fn calls(&self) -> usize {
        self.calls
    }

    /// A new step starts: its calls are judged afresh for repeats.
    pub fn start_step(&mut self) {
        self.repeated = None;
    }

    /// Counts `n` calls the step made past the per-step cap (never run, but they spend budget).
    pub fn count_dropped(&mut self, n: usize) {
        self.calls += n;
    }

    /// Whether the budget is spent (the next step is the last, with no tools).
    pub fn spent(&self) -> bool {
        self.calls >= self.budget
    }

    /// Counts `call`, made in `step`, and says whether it may run.
    pub fn admit(&mut self, call: &ToolCall, step: usize) -> Verdict {
        self.calls += 1;
        let budget = self.budget;
        if self.calls > budget {
            return Verdict::Refuse(format!(
                "not run: the tool-call budget of this reply ({budget} calls) is spent"
            ));
        }
        if let Some((tool, first)) = &self.repeated {
            return Verdict::Refuse(format!(
                "not run: this step was stopped at its repeated `{tool}` call (first made in step {first}); \
                 use the results above and decide again"
            ));
        }
        if !self.detect_repeats {
            return Verdict::Run;
        }
        let key = call_key(call);
        if let Some(&first) = self.seen.get(&key) {
            self.repeated = Some((call.name.clone(), first));
            return Verdict::Repeat {
                first_step: first,
                error: format!(
                    "not run again: this exact call was already made in step {first} and its result is above; \
                     the rest of this step is not run either. Do not repeat a call: use its result or try \
                     something different"
                ),
            };
        }
        self.seen.insert(key, step);
        Verdict::Run
    }
}

/// The loop detector's key: the tool and its arguments in canonical form.
pub fn call_key(call: &ToolCall) -> String {
    match &call.arguments {
        Ok(v) => format!("{}\u{0}{v}", call.name),
        Err(_) => format!("{}\u{0}{}", call.name, call.arguments_raw),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(name: &str, args: &str) -> ToolCall {
        ToolCall {
            id: "x".into(),
            name: name.into(),
            arguments_raw: args.into(),
            arguments: serde_json::from_str(args)
                .map_err(|e| crate::llm::tool_calls::ArgumentsError::invalid_json(&e)),
        }
    }

    #[test]
    fn keys_are_canonical() {
        assert_eq!(
            call_key(&c("read_file", r#"{"a":1,"b":2}"#)),
            call_key(&c("read_file", r#"{"b":2, "a":1}"#))
        );
        assert_ne!(
            call_key(&c("read_file", r#"{"a":1}"#)),
            call_key(&c("read_file", r#"{"a":2}"#))
        );
    }

    #[test]
    fn budget_and_repeats() {
        let mut g = CallGate::new(3);
        assert_eq!(g.admit(&c("read_file", r#"{"a":1}"#), 1), Verdict::Run);
        g.start_step();
        // The repeat stops the rest of its step.
        assert!(matches!(
            g.admit(&c("read_file", r#"{"a":1}"#), 2),
            Verdict::Repeat { first_step: 1, .. }
        ));
        assert!(matches!(
            g.admit(&c("list_files", "{}"), 2),
            Verdict::Refuse(e) if e.contains("stopped at its repeated `read_file`")
        ));
        assert!(g.spent());
        g.start_step();
        assert!(matches!(
            g.admit(&c("list_files", "{}"), 3),
            Verdict::Refuse(e) if e.contains("budget of this reply (3 calls)")
        ));
    }
}
