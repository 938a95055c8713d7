//! The `spend` object of config.json (ECOSYSTEM-PROTOCOL.md §11): the spend caps, in US dollars.
//! Each is optional; none set means no check (and no price lookup) before a model request.

use serde_json::Value;

/// The caps a user set. A cap is a positive number of dollars.
#[derive(Debug, Clone, Copy, Default)]
pub struct SpendConfig {
    /// What one reply (every request of one `send`) may cost (`per_reply_usd`).
    pub per_reply_usd: Option<f64>,
    /// What one UTC day may cost, all chats and projects of the user together (`per_day_usd`).
    pub per_day_usd: Option<f64>,
    /// What one UTC calendar month may cost (`per_month_usd`).
    pub per_month_usd: Option<f64>,
}

// The caps are finite numbers (parse refuses NaN), so bitwise equality is equality.
impl PartialEq for SpendConfig {
    fn eq(&self, o: &Self) -> bool {
        let b = |v: Option<f64>| v.map(f64::to_bits);
        b(self.per_reply_usd) == b(o.per_reply_usd)
            && b(self.per_day_usd) == b(o.per_day_usd)
            && b(self.per_month_usd) == b(o.per_month_usd)
    }
}

impl Eq for SpendConfig {}

/// The keys of the `spend` object.
pub const KEYS: [&str; 3] = ["per_reply_usd", "per_day_usd", "per_month_usd"];

impl SpendConfig {
    /// Whether any cap is set.
    pub fn any(&self) -> bool {
        self.per_reply_usd.is_some() || self.per_day_usd.is_some() || self.per_month_usd.is_some()
    }

    /// Parses the `spend` value of config.json; every problem names its key (`spend.…`).
    pub fn parse(v: &Value) -> Result<SpendConfig, Vec<String>> {
        let Value::Object(map) = v else {
            return Err(vec!["spend must be an object".to_string()]);
        };
        let mut c = SpendConfig::default();
        let mut problems = Vec::new();
        for key in KEYS {
            let slot = match key {
                "per_reply_usd" => &mut c.per_reply_usd,
                "per_day_usd" => &mut c.per_day_usd,
                _ => &mut c.per_month_usd,
            };
            match map.get(key) {
                None | Some(Value::Null) => {}
                Some(Value::Number(n)) if n.as_f64().is_some_and(|x| x.is_finite() && x > 0.0) => {
                    *slot = n.as_f64();
                }
                Some(_) => problems.push(format!(
                    "spend.{key} must be a positive number of US dollars"
                )),
            }
        }
        for key in map.keys() {
            if !KEYS.contains(&key.as_str()) {
                problems.push(format!("spend.{key} is not a known setting"));
            }
        }
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(problems)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn caps_parse_and_name_their_key() {
        let c = SpendConfig::parse(&json!({})).unwrap();
        assert!(!c.any());
        let c = SpendConfig::parse(&json!({"per_day_usd": 2, "per_reply_usd": 0.5})).unwrap();
        assert_eq!(c.per_day_usd, Some(2.0));
        assert_eq!(c.per_reply_usd, Some(0.5));
        assert_eq!(c.per_month_usd, None);
        let e = SpendConfig::parse(&json!({"per_day_usd": -1, "per_month_usd": "5", "x": 1}))
            .unwrap_err();
        assert_eq!(e.len(), 3, "{e:?}");
        assert!(e[0].contains("spend.per_day_usd"), "{e:?}");
        assert!(SpendConfig::parse(&json!(3)).is_err());
    }
}
