//! `get_usage` (ECOSYSTEM-PROTOCOL.md §11): the user's usage ledger since a time, grouped by day,
//! model or chat; with the spend caps set and what was spent today and this month, for the
//! client's footer.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::json;

use super::Handled;
use crate::protocol::request::Request;
use crate::protocol::{Ctx, reply};
use crate::spend::Ledger;
use crate::spend::usage::{self, GroupBy};

/// `since`: an RFC 3339 time or a `YYYY-MM-DD` day (midnight UTC).
fn parse_since(s: &str) -> Option<DateTime<Utc>> {
    if let Ok(t) = DateTime::parse_from_rfc3339(s.trim()) {
        return Some(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(s.trim(), "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
}

pub fn get_usage(ctx: &Ctx, req: &Request) -> Handled {
    let by = match req.opt_str("group_by")? {
        None => GroupBy::Day,
        Some(s) => GroupBy::parse(s)
            .ok_or(r#"Invalid field: group_by must be "day", "model" or "chat""#.to_string())?,
    };
    let since = match req.opt_str("since")? {
        None => None,
        Some(s) => Some(parse_since(s).ok_or(
            "Invalid field: since must be a date (YYYY-MM-DD) or an RFC 3339 time".to_string(),
        )?),
    };
    let caps = ctx.lock().config.config().spend;
    let ledger = Ledger::open_global().map_err(|e| e.to_string())?;
    let entries = ledger.entries(since.as_ref()).map_err(|e| e.to_string())?;
    let (day, month) = ledger
        .spent(&crate::spend::now())
        .map_err(|e| e.to_string())?;
    Ok(reply(
        "usage",
        json!({
            "rows": usage::rows(&entries, by),
            "group_by": match by { GroupBy::Day => "day", GroupBy::Model => "model", GroupBy::Chat => "chat" },
            "caps": {
                "per_reply_usd": caps.per_reply_usd,
                "per_day_usd": caps.per_day_usd,
                "per_month_usd": caps.per_month_usd,
            },
            "spent": {"day": day, "month": month},
        }),
    ))
}
