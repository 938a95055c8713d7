//! The global config file, `~/.config/bb7/config.json`: loading, validation and defaults.
//!
//! A missing or broken config never stops the host: it falls back to the defaults and keeps the reason, which
//! the actions that need the API key (sending, titles, balance, models) report instead of calling the network.

pub mod agent;
pub mod providers;
pub mod spend;

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

/// The config file's name inside [`config_dir`].
pub const CONFIG_FILE: &str = "config.json";
/// How the default config path is shown to the user.
pub const CONFIG_PATH_DISPLAY: &str = "~/.config/bb7/config.json";
/// The default OpenRouter-compatible API base URL.
pub const DEFAULT_BASE_URL: &str = "https://openrouter.ai/api/v1";
/// The model new chats use when neither the config nor the global state names one.
pub const DEFAULT_MODEL: &str = "anthropic/claude-sonnet-4";
/// The default model for generating chat titles.
pub const DEFAULT_TITLE_MODEL: &str = "anthropic/claude-3-haiku";
/// The error for a config without a usable API key.
pub const API_KEY_NOT_SET: &str = "API key not set in config";
/// Silence (milliseconds) after which a streaming reply is abandoned.
pub const DEFAULT_STREAM_IDLE_TIMEOUT_MS: u64 = 120_000;

/// The error for a `diff_mode` value that is not one of the four modes (EDITS.md).
pub const DIFF_MODE_ERROR: &str =
    r#"diff_mode must be "search_replace", "search_replace_multi", "anchored", or "off""#;

/// BB-7's config directory: `$HOME/.config/bb7`, or `None` when `HOME` is unset.
pub fn config_dir() -> Option<PathBuf> {
    crate::paths::home().map(|h| h.join(".config").join("bb7"))
}

/// The config file: `$HOME/.config/bb7/config.json`.
pub fn config_path() -> Option<PathBuf> {
    config_dir().map(|d| d.join(CONFIG_FILE))
}

/// Shows `path` the way users know it: with `$HOME` replaced by `~`.
pub fn display_path(path: &Path) -> String {
    if let Some(home) = crate::paths::home()
        && let Ok(rest) = path.strip_prefix(&home)
    {
        if rest.as_os_str().is_empty() {
            return "~".to_string();
        }
        return format!("~/{}", rest.display());
    }
    path.display().to_string()
}

/// Which `edit_file` schema the model is offered (EDITS.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum DiffMode {
    /// One `path/file_id/old_string/new_string` edit per call.
    SearchReplace,
    /// `edits[]`: several search/replace edits, possibly on several files, per call.
    #[default]
    SearchReplaceMulti,
    /// `changes[]` of line anchors (experimental).
    Anchored,
    /// No `edit_file`: `write_file` only.
    Off,
}

impl DiffMode {
    /// The config spelling of this mode.
    pub fn as_str(self) -> &'static str {
        match self {
            DiffMode::SearchReplace => "search_replace",
            DiffMode::SearchReplaceMulti => "search_replace_multi",
            DiffMode::Anchored => "anchored",
            DiffMode::Off => "off",
        }
    }

    /// Parses a config value; `None` for anything but the four spellings.
    pub fn parse(s: &str) -> Option<DiffMode> {
        match s {
            "search_replace" => Some(DiffMode::SearchReplace),
            "search_replace_multi" => Some(DiffMode::SearchReplaceMulti),
            "anchored" => Some(DiffMode::Anchored),
            "off" => Some(DiffMode::Off),
            _ => None,
        }
    }
}

impl fmt::Display for DiffMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The settings of `config.json`, with the defaults filled in.
#[derive(Clone, PartialEq, Eq)]
pub struct Config {
    /// The OpenRouter API key (trimmed); `None` when unset.
    pub api_key: Option<String>,
    /// The API base URL, without a trailing `/`.
    pub base_url: String,
    /// The initial model for new chats, only when the file sets one (it then wins over the last-used model).
    pub default_model: Option<String>,
    /// The model for title generation.
    pub title_model: String,
    /// Allow providers that retain data transiently.
    pub allow_data_retention: bool,
    /// Allow providers that train on user data.
    pub allow_training: bool,
    /// Send `prompt_cache_key` with chat requests.
    pub explicit_cache_key: bool,
    /// Make one hidden repair attempt after a reply whose edits partly failed.
    pub auto_retry_partial_edits: bool,
    /// Which `edit_file` schema the model sees.
    pub diff_mode: DiffMode,
    /// The longest silence (milliseconds; the key `stream_idle_timeout` is in seconds) tolerated
    /// while a reply streams.
    pub stream_idle_timeout_ms: u64,
    /// Agent mode: the tool-call budget, retrieval limits and the secret deny list (`agent`).
    pub agent: agent::AgentConfig,
    /// The spend caps (`spend`, ECOSYSTEM-PROTOCOL.md §11).
    pub spend: spend::SpendConfig,
    /// The local provider and the hybrid routing's settings (`providers`, ECOSYSTEM-PROTOCOL.md §10).
    pub providers: providers::ProvidersConfig,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            api_key: None,
            base_url: DEFAULT_BASE_URL.to_string(),
            default_model: None,
            title_model: DEFAULT_TITLE_MODEL.to_string(),
            allow_data_retention: true,
            allow_training: false,
            explicit_cache_key: false,
            auto_retry_partial_edits: false,
            diff_mode: DiffMode::default(),
            stream_idle_timeout_ms: DEFAULT_STREAM_IDLE_TIMEOUT_MS,
            agent: Default::default(),
            spend: Default::default(),
            providers: Default::default(),
        }
    }
}

impl fmt::Debug for Config {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Config")
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("base_url", &self.base_url)
            .field("default_model", &self.default_model)
            .field("title_model", &self.title_model)
            .field("allow_data_retention", &self.allow_data_retention)
            .field("allow_training", &self.allow_training)
            .field("explicit_cache_key", &self.explicit_cache_key)
            .field("auto_retry_partial_edits", &self.auto_retry_partial_edits)
            .field("diff_mode", &self.diff_mode)
            .field("stream_idle_timeout_ms", &self.stream_idle_timeout_ms)
            .field("agent", &self.agent)
            .field("spend", &self.spend)
            .field("providers", &self.providers)
            .finish()
    }
}

impl Config {
    /// The model for a new chat when nothing else picks one: `default_model`, else `anthropic/claude-sonnet-4`.
    pub fn effective_default_model(&self) -> &str {
        self.default_model.as_deref().unwrap_or(DEFAULT_MODEL)
    }

    /// Parses the text of a config file. On error, returns every problem found, each naming its key.
    pub fn parse(text: &str) -> Result<Config, Vec<String>> {
        let value: Value =
            serde_json::from_str(text).map_err(|e| vec![format!("invalid JSON: {e}")])?;
        let Value::Object(map) = value else {
            return Err(vec!["the config must be a JSON object".to_string()]);
        };
        let mut problems = Vec::new();
        let mut config = Config::default();
        let mut p = Parser {
            map: &map,
            problems: &mut problems,
        };

        if let Some(key) = p.string("api_key") {
            let key = key.trim();
            config.api_key = (!key.is_empty()).then(|| key.to_string());
        }
        if let Some(url) = p.string("base_url") {
            let url = url.trim().trim_end_matches('/');
            if url.is_empty() {
                p.problem("base_url must be a non-empty string".to_string());
            } else if !(url.starts_with("https://") || url.starts_with("http://")) {
                p.problem(format!(
                    "base_url must start with https:// or http://: {url}"
                ));
            } else {
                config.base_url = url.to_string();
            }
        }
        if let Some(model) = p.string("default_model") {
            let model = model.trim();
            config.default_model = (!model.is_empty()).then(|| model.to_string());
        }
        if let Some(model) = p.string("title_model") {
            let model = model.trim();
            if !model.is_empty() {
                config.title_model = model.to_string();
            }
        }
        if let Some(b) = p.bool("allow_data_retention") {
            config.allow_data_retention = b;
        }
        if let Some(b) = p.bool("allow_training") {
            config.allow_training = b;
        }
        if let Some(b) = p.bool("explicit_cache_key") {
            config.explicit_cache_key = b;
        }
        if let Some(b) = p.bool("auto_retry_partial_edits") {
            config.auto_retry_partial_edits = b;
        }
        match p.map.get("stream_idle_timeout") {
            None | Some(Value::Null) => {}
            Some(Value::Number(n)) if n.as_f64().is_some_and(|s| s > 0.0 && s <= 3600.0) => {
                let secs = n.as_f64().unwrap_or(0.0);
                config.stream_idle_timeout_ms = (secs * 1000.0).round().max(1.0) as u64;
            }
            Some(_) => p.problem(
                "stream_idle_timeout must be a number of seconds between 0 and 3600".to_string(),
            ),
        }
        match p.map.get("diff_mode") {
            None | Some(Value::Null) => {}
            Some(Value::String(s)) if s.is_empty() => {}
            Some(Value::String(s)) => match DiffMode::parse(s) {
                Some(mode) => config.diff_mode = mode,
                None => p.problem(DIFF_MODE_ERROR.to_string()),
            },
            Some(_) => p.problem(DIFF_MODE_ERROR.to_string()),
        }
        match p.map.get("agent") {
            None | Some(Value::Null) => {}
            Some(v) => match agent::AgentConfig::parse(v) {
                Ok(a) => config.agent = a,
                Err(ps) => ps.into_iter().for_each(|e| p.problem(e)),
            },
        }
        match p.map.get("spend") {
            None | Some(Value::Null) => {}
            Some(v) => match spend::SpendConfig::parse(v) {
                Ok(c) => config.spend = c,
                Err(ps) => ps.into_iter().for_each(|e| p.problem(e)),
            },
        }
        match p.map.get("providers") {
            None | Some(Value::Null) => {}
            Some(v) => match providers::parse(v) {
                Ok(parsed) => {
                    config.providers = parsed.config;
                    if let Some(url) = parsed.remote_base_url {
                        config.base_url = url;
                    }
                    if let Some(key) = parsed.remote_api_key {
                        config.api_key = Some(key);
                    }
                }
                Err(ps) => ps.into_iter().for_each(|e| p.problem(e)),
            },
        }

        if problems.is_empty() {
            Ok(config)
        } else {
            Err(problems)
        }
    }
}

/// Reads typed keys out of the config object, recording a problem for each key of the wrong type.
struct Parser<'a> {
    map: &'a Map<String, Value>,
    problems: &'a mut Vec<String>,
}

impl<'a> Parser<'a> {
    fn problem(&mut self, message: String) {
        self.problems.push(message);
    }

    /// The string value of `key`; `None` when absent, `null`, or of another type (a problem).
    fn string(&mut self, key: &str) -> Option<&'a str> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s),
            Some(other) => {
                self.problem(format!("{key} must be a string, not {}", kind(other)));
                None
            }
        }
    }

    /// The boolean value of `key`; `None` when absent, `null`, or of another type (a problem).
    fn bool(&mut self, key: &str) -> Option<bool> {
        match self.map.get(key) {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                self.problem(format!("{key} must be true or false, not {}", kind(other)));
                None
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether the config file was found and usable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigStatus {
    /// No config file (or no `HOME`): the defaults apply and there is no API key.
    Missing,
    /// The file was read and every known key is valid.
    Valid,
    /// The file exists but could not be read or is invalid; the defaults apply. Holds the full message.
    Invalid(String),
}

/// The loaded config, and whether it came from a valid file.
#[derive(Debug, Clone)]
pub struct ConfigState {
    /// The effective settings (all defaults unless the status is [`ConfigStatus::Valid`]).
    pub config: Config,
    /// Where the settings came from.
    pub status: ConfigStatus,
    /// The config path as shown to the user (`~/.config/bb7/config.json`).
    pub display_path: String,
}

impl ConfigState {
    /// The effective settings.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Why the config is not usable: `Config file not found: ~/.config/bb7/config.json`, or the message of an
    /// invalid file. `None` for a valid file.
    pub fn error(&self) -> Option<String> {
        match &self.status {
            ConfigStatus::Valid => None,
            ConfigStatus::Missing => Some(format!("Config file not found: {}", self.display_path)),
            ConfigStatus::Invalid(message) => Some(message.clone()),
        }
    }

    /// The API key, or the message to report to actions that need it: the missing/invalid-file error, else
    /// `API key not set in config`.
    pub fn api_key(&self) -> Result<&str, ConfigError> {
        match &self.status {
            ConfigStatus::Valid => {}
            ConfigStatus::Missing => return Err(ConfigError::Missing(self.display_path.clone())),
            ConfigStatus::Invalid(message) => return Err(ConfigError::Invalid(message.clone())),
        }
        match self.config.api_key.as_deref() {
            Some(key) if !key.trim().is_empty() => Ok(key),
            _ => Err(ConfigError::NoApiKey),
        }
    }
}

/// Why the config cannot give an API key; the text is the message actions that need one report.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// No config file (at the path shown).
    #[error("Config file not found: {0}")]
    Missing(String),
    /// The file is not a valid config; the message names every problem.
    #[error("{0}")]
    Invalid(String),
    /// A valid file without a usable `api_key`.
    #[error("{}", API_KEY_NOT_SET)]
    NoApiKey,
}

/// Loads `~/.config/bb7/config.json`. Never fails: see [`ConfigState`].
pub fn load() -> ConfigState {
    match config_path() {
        Some(path) => load_from(&path),
        None => ConfigState {
            config: Config::default(),
            status: ConfigStatus::Missing,
            display_path: CONFIG_PATH_DISPLAY.to_string(),
        },
    }
}

/// Loads a config file at `path`. Never fails: a missing, unreadable or invalid file yields the defaults and
/// a status saying why.
pub fn load_from(path: &Path) -> ConfigState {
    let display_path = display_path(path);
    let invalid = |message: String| ConfigState {
        config: Config::default(),
        status: ConfigStatus::Invalid(message),
        display_path: display_path.clone(),
    };
    let bytes = match crate::store::read_regular_path(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return ConfigState {
                config: Config::default(),
                status: ConfigStatus::Missing,
                display_path,
            };
        }
        Err(e) => return invalid(format!("Cannot read config file {display_path}: {e}")),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return invalid(format!(
            "Invalid config file {display_path}: not valid UTF-8"
        ));
    };
    match Config::parse(&text) {
        Ok(config) => ConfigState {
            config,
            status: ConfigStatus::Valid,
            display_path,
        },
        Err(problems) => invalid(format!(
            "Invalid config file {display_path}: {}",
            problems.join("; ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &tempfile::TempDir, text: &str) -> PathBuf {
        let path = dir.path().join("config.json");
        std::fs::write(&path, text).unwrap();
        path
    }

    fn problems(text: &str) -> Vec<String> {
        Config::parse(text).unwrap_err()
    }

    #[test]
    fn defaults_match_the_spec() {
        let c = Config::default();
        assert_eq!(c.api_key, None);
        assert_eq!(c.base_url, "https://openrouter.ai/api/v1");
        assert_eq!(c.default_model, None);
        assert_eq!(c.effective_default_model(), "anthropic/claude-sonnet-4");
        assert_eq!(c.title_model, "anthropic/claude-3-haiku");
        assert!(c.allow_data_retention);
        assert!(!c.allow_training);
        assert!(!c.explicit_cache_key);
        assert!(!c.auto_retry_partial_edits);
        assert_eq!(c.diff_mode, DiffMode::SearchReplaceMulti);
    }

    #[test]
    fn missing_file_gives_defaults_and_the_not_found_error() {
        let dir = tempfile::tempdir().unwrap();
        let state = load_from(&dir.path().join("config.json"));
        assert_eq!(state.status, ConfigStatus::Missing);
        assert_eq!(state.config, Config::default());
        let err = state.error().unwrap();
        assert!(err.starts_with("Config file not found: "), "{err}");
        assert_eq!(state.api_key().unwrap_err().to_string(), err);
    }

    #[test]
    fn missing_default_config_names_the_tilde_path() {
        let state = ConfigState {
            config: Config::default(),
            status: ConfigStatus::Missing,
            display_path: CONFIG_PATH_DISPLAY.to_string(),
        };
        assert_eq!(
            state.api_key().unwrap_err().to_string(),
            "Config file not found: ~/.config/bb7/config.json"
        );
    }

    #[test]
    fn full_valid_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            r#"{
              "api_key": " sk-or-secret ",
              "base_url": "http://127.0.0.1:8080/v1/",
              "default_model": "openai/gpt-4o",
              "title_model": "openai/gpt-4o-mini",
              "allow_data_retention": false,
              "allow_training": true,
              "explicit_cache_key": true,
              "auto_retry_partial_edits": true,
              "diff_mode": "anchored",
              "some_future_key": {"nested": [1, 2]}
            }"#,
        );
        let state = load_from(&path);
        assert_eq!(state.status, ConfigStatus::Valid);
        assert_eq!(state.error(), None);
        assert_eq!(state.api_key(), Ok("sk-or-secret"));
        let c = state.config();
        assert_eq!(c.base_url, "http://127.0.0.1:8080/v1");
        assert_eq!(c.default_model.as_deref(), Some("openai/gpt-4o"));
        assert_eq!(c.effective_default_model(), "openai/gpt-4o");
        assert_eq!(c.title_model, "openai/gpt-4o-mini");
        assert!(!c.allow_data_retention);
        assert!(c.allow_training);
        assert!(c.explicit_cache_key);
        assert!(c.auto_retry_partial_edits);
        assert_eq!(c.diff_mode, DiffMode::Anchored);
    }

    #[test]
    fn minimal_file_keeps_defaults_and_reports_no_default_model() {
        let c = Config::parse(r#"{"api_key": "k"}"#).unwrap();
        assert_eq!(c.default_model, None);
        assert_eq!(Config { api_key: None, ..c }, Config::default());
        let c =
            Config::parse(r#"{"api_key": "k", "default_model": "", "title_model": null}"#).unwrap();
        assert_eq!(c.default_model, None);
        assert_eq!(c.title_model, DEFAULT_TITLE_MODEL);
    }

    #[test]
    fn every_diff_mode_parses() {
        for mode in [
            DiffMode::SearchReplace,
            DiffMode::SearchReplaceMulti,
            DiffMode::Anchored,
            DiffMode::Off,
        ] {
            let c = Config::parse(&format!(r#"{{"diff_mode": "{mode}"}}"#)).unwrap();
            assert_eq!(c.diff_mode, mode);
        }
        let c = Config::parse(r#"{"diff_mode": ""}"#).unwrap();
        assert_eq!(c.diff_mode, DiffMode::SearchReplaceMulti);
    }

    #[test]
    fn bad_diff_mode_uses_the_exact_message() {
        assert_eq!(
            problems(r#"{"diff_mode": "unified"}"#),
            vec![
                r#"diff_mode must be "search_replace", "search_replace_multi", "anchored", or "off""#
            ]
        );
        assert_eq!(problems(r#"{"diff_mode": 3}"#), vec![DIFF_MODE_ERROR]);
    }

    #[test]
    fn invalid_json_falls_back_to_defaults() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(&dir, "{\"api_key\": \"k\",\n}");
        let state = load_from(&path);
        assert_eq!(state.config, Config::default());
        let ConfigStatus::Invalid(message) = &state.status else {
            panic!("{:?}", state.status)
        };
        assert!(message.starts_with("Invalid config file "), "{message}");
        assert!(message.contains("invalid JSON"), "{message}");
        assert!(message.contains("line 2"), "{message}");
        assert_eq!(state.api_key().unwrap_err().to_string(), *message);
    }

    #[test]
    fn non_object_and_empty_files_are_invalid() {
        assert_eq!(problems("[1, 2]"), vec!["the config must be a JSON object"]);
        assert!(problems("")[0].starts_with("invalid JSON"));
        assert!(problems("null")[0].contains("JSON object"));
    }

    #[test]
    fn wrong_types_name_the_key() {
        let p = problems(
            r#"{"api_key": 5, "allow_training": "yes", "explicit_cache_key": 1, "title_model": [], "default_model": {}}"#,
        );
        assert!(
            p.contains(&"api_key must be a string, not a number".to_string()),
            "{p:?}"
        );
        assert!(
            p.contains(&"allow_training must be true or false, not a string".to_string()),
            "{p:?}"
        );
        assert!(
            p.contains(&"explicit_cache_key must be true or false, not a number".to_string()),
            "{p:?}"
        );
        assert!(
            p.contains(&"title_model must be a string, not an array".to_string()),
            "{p:?}"
        );
        assert!(
            p.contains(&"default_model must be a string, not an object".to_string()),
            "{p:?}"
        );
    }

    #[test]
    fn bad_base_url() {
        assert_eq!(
            problems(r#"{"base_url": ""}"#),
            vec!["base_url must be a non-empty string"]
        );
        assert_eq!(
            problems(r#"{"base_url": "  / "}"#),
            vec!["base_url must be a non-empty string"]
        );
        assert_eq!(
            problems(r#"{"base_url": 1}"#),
            vec!["base_url must be a string, not a number"]
        );
        assert_eq!(
            problems(r#"{"base_url": "openrouter.ai/api/v1"}"#),
            vec!["base_url must start with https:// or http://: openrouter.ai/api/v1"]
        );
    }

    #[test]
    fn broken_file_message_names_the_key_and_blocks_the_api_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = write(
            &dir,
            r#"{"api_key": "k", "diff_mode": "x", "allow_training": 0}"#,
        );
        let state = load_from(&path);
        assert_eq!(state.config, Config::default());
        let err = state.api_key().unwrap_err().to_string();
        assert!(err.contains(DIFF_MODE_ERROR), "{err}");
        assert!(
            err.contains("allow_training must be true or false"),
            "{err}"
        );
    }

    #[test]
    fn api_key_absent_or_blank() {
        let dir = tempfile::tempdir().unwrap();
        for text in [
            "{}",
            r#"{"api_key": ""}"#,
            r#"{"api_key": "   "}"#,
            r#"{"api_key": null}"#,
        ] {
            let state = load_from(&write(&dir, text));
            assert_eq!(state.status, ConfigStatus::Valid, "{text}");
            assert_eq!(state.api_key(), Err(ConfigError::NoApiKey));
            assert_eq!(
                state.api_key().unwrap_err().to_string(),
                "API key not set in config"
            );
        }
    }

    #[test]
    fn unreadable_and_non_utf8_files_are_invalid_not_fatal() {
        let dir = tempfile::tempdir().unwrap();
        let state = load_from(dir.path());
        assert!(
            matches!(state.status, ConfigStatus::Invalid(_)),
            "{state:?}"
        );
        let path = dir.path().join("config.json");
        std::fs::write(&path, b"{\"api_key\": \"\xff\"}").unwrap();
        let state = load_from(&path);
        let ConfigStatus::Invalid(message) = &state.status else {
            panic!("{:?}", state.status)
        };
        assert!(message.ends_with("not valid UTF-8"), "{message}");
    }

    #[test]
    fn debug_redacts_the_api_key() {
        let c = Config {
            api_key: Some("sk-or-very-secret".to_string()),
            ..Config::default()
        };
        let shown = format!("{c:?}");
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains(r#"api_key: Some("<redacted>")"#), "{shown}");
        let state = ConfigState {
            config: c,
            status: ConfigStatus::Valid,
            display_path: String::new(),
        };
        assert!(!format!("{state:?}").contains("very-secret"));
        assert!(format!("{:?}", Config::default()).contains("api_key: None"));
    }

    #[test]
    fn display_path_uses_tilde_under_home() {
        if let Some(home) = crate::paths::home() {
            assert_eq!(
                display_path(&home.join(".config/bb7/config.json")),
                "~/.config/bb7/config.json"
            );
        }
        assert_eq!(
            display_path(Path::new("/nonexistent-root/x")),
            "/nonexistent-root/x"
        );
    }
}
