//! The command line: argument parsing and the `tools` subcommands.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod audit;
mod tools;

/// BB-7: an LLM coding companion for Neovim whose file tools run as sandboxed WebAssembly components.
///
/// With no subcommand, bb7 serves the line-delimited JSON protocol on stdin/stdout (Neovim starts it).
#[derive(Debug, Parser)]
#[command(name = "bb7", version = crate::VERSION, disable_version_flag = true)]
struct Cli {
    /// Print `bb7 <version>` and exit.
    #[arg(long, short = 'V')]
    version: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Inspect and run the sandboxed tool components.
    #[command(subcommand)]
    Tools(tools::ToolsCommand),
    /// Verify and read the audit chain (~/.bb7/audit/log.jsonl).
    #[command(subcommand)]
    Audit(audit::AuditCommand),
    /// Serve the sandboxed tools to an MCP client over stdio (doc/mcp.md).
    Mcp {
        /// The project (default: the nearest directory above the current one holding .bb7/).
        #[arg(long, value_name = "DIR")]
        project: Option<std::path::PathBuf>,
        /// Also offer write_file and edit_file, staged into the chat `mcp: <client name>` for
        /// review in Neovim (:BB7Review); the project itself is never written.
        #[arg(long)]
        stage: bool,
    },
}

/// Parses the command line and runs it.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() {
                ExitCode::from(2)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    if cli.version {
        println!("bb7 {}", crate::VERSION);
        return ExitCode::SUCCESS;
    }
    match cli.command {
        Some(Command::Tools(cmd)) => {
            init_cli_logging();
            crate::audit::set_process_actor(crate::audit::Actor::User);
            unaudited_fails(tools::run(cmd))
        }
        Some(Command::Audit(cmd)) => {
            init_cli_logging();
            audit::run(cmd)
        }
        // stdout is the MCP session and stderr stays silent while it runs.
        Some(Command::Mcp { project, stage }) => crate::mcp::main(project, stage),
        None => crate::protocol::serve(),
    }
}

/// Exit status 3: the command did its work, but the audit chain could not take a record of it (the
/// record went to `<log>.unchained`; see `doc/audit.md`).
pub const EXIT_UNAUDITED: u8 = 3;

/// `code`, unless an audit record could not be chained: then the reason on stderr, and a command
/// that otherwise succeeded exits [`EXIT_UNAUDITED`].
fn unaudited_fails(code: ExitCode) -> ExitCode {
    match crate::audit::take_trouble() {
        None => code,
        Some(t) => {
            eprintln!("bb7: {t}");
            if code == ExitCode::SUCCESS {
                ExitCode::from(EXIT_UNAUDITED)
            } else {
                code
            }
        }
    }
}

/// CLI subcommands show warnings on stderr (the protocol server never does).
fn init_cli_logging() {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .without_time()
        .with_target(false)
        .try_init();
}
