//! [`AgentError`]: why a reply could not be set up, worded as the client is told.

/// Why a reply could not be set up (before anything is sent to the model). The `Display` text is
/// the message the client gets.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    /// Agent mode was asked for in a chat without a project.
    #[error("{}", super::mode::GLOBAL_AGENT_ERROR)]
    GlobalAgent,
    /// Plan mode was asked for in a chat without a project.
    #[error("{}", super::mode::GLOBAL_PLAN_ERROR)]
    GlobalPlan,
    /// The project's instructions file could not be read.
    #[error("Project instructions error: {0}")]
    Instructions(String),
    /// A tool could not describe itself.
    #[error("{0}")]
    Describe(String),
    /// The project could not be opened for the retrieval tools.
    #[error("{0}")]
    Project(String),
    /// The chat directory could not be opened again for the reply.
    #[error("Cannot open chat: {0}")]
    ChatDir(std::io::Error),
    /// The reply's staging directory could not be created.
    #[error("Cannot create the staging directory: {0}")]
    Staging(std::io::Error),
    /// A `pre_send` hook denied the send (`Denied by hook <name>: <reason>`).
    #[error(transparent)]
    Hook(#[from] crate::hooks::Denied),
    /// The model client could not be made (no API key, a bad base URL: its own message).
    #[error(transparent)]
    Llm(#[from] crate::llm::LlmError),
    /// The routing asked for cannot be set up (no local provider configured).
    #[error(transparent)]
    Routing(#[from] crate::llm::routing::RoutingSetupError),
}
