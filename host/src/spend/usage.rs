//! `get_usage`: the ledger's requests since a time, summed per day, model or chat.

use std::collections::BTreeMap;

use serde::Serialize;

use super::ledger::Entry;

/// How `get_usage` groups the requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupBy {
    /// The UTC day of the request (`YYYY-MM-DD`).
    Day,
    /// The model asked.
    Model,
    /// The chat's id.
    Chat,
}

impl GroupBy {
    /// `"day"`, `"model"` or `"chat"`.
    pub fn parse(s: &str) -> Option<GroupBy> {
        match s {
            "day" => Some(GroupBy::Day),
            "model" => Some(GroupBy::Model),
            "chat" => Some(GroupBy::Chat),
            _ => None,
        }
    }

    fn key(self, e: &Entry) -> String {
        match self {
            GroupBy::Day => e.time.get(..10).unwrap_or(&e.time).to_string(),
            GroupBy::Model => e.model.clone(),
            GroupBy::Chat => e.chat.clone(),
        }
    }
}

/// One row of `get_usage`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Row {
    /// The day, model or chat.
    pub key: String,
    /// Requests made.
    pub requests: u64,
    /// Input tokens.
    pub prompt_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Input tokens read from the cache.
    pub cached_tokens: u64,
    /// Dollars spent.
    pub cost: f64,
}

/// The rows of `entries` grouped `by`, in key order (days oldest first).
pub fn rows(entries: &[Entry], by: GroupBy) -> Vec<Row> {
    let mut m: BTreeMap<String, Row> = BTreeMap::new();
    for e in entries {
        let key = by.key(e);
        let r = m.entry(key.clone()).or_insert_with(|| Row {
            key,
            ..Row::default()
        });
        r.requests += 1;
        r.prompt_tokens += e.prompt_tokens;
        r.completion_tokens += e.completion_tokens;
        r.cached_tokens += e.cached_tokens;
        r.cost += e.cost;
    }
    m.into_values().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_sum_per_key() {
        let e = |time: &str, model: &str, cost: f64| Entry {
            time: time.into(),
            model: model.into(),
            chat: "c1".into(),
            prompt_tokens: 10,
            completion_tokens: 2,
            cached_tokens: 1,
            cost,
            partial: false,
        };
        let es = [
            e("2026-01-01T00:00:00Z", "a", 1.0),
            e("2026-01-01T05:00:00Z", "b", 2.0),
            e("2026-01-02T00:00:00Z", "a", 4.0),
        ];
        let days = rows(&es, GroupBy::Day);
        assert_eq!(days.len(), 2);
        assert_eq!(
            (days[0].key.as_str(), days[0].requests, days[0].cost),
            ("2026-01-01", 2, 3.0)
        );
        let models = rows(&es, GroupBy::Model);
        assert_eq!((models[0].key.as_str(), models[0].prompt_tokens), ("a", 20));
        let chats = rows(&es, GroupBy::Chat);
        assert_eq!(
            (chats.len(), chats[0].cost, chats[0].cached_tokens),
            (1, 7.0, 3)
        );
    }
}
