//! `bb7 tools list | audit | call`: what the tool components are, what they may touch, and running one.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::sandbox::cache::CacheOutcome;
use crate::sandbox::{Access, AuditLog, Grant, Limits, Sandbox, ToolComponent};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the built-in tools with their one-line descriptions (as the sandboxed components give them).
    List {
        /// The diff_mode whose edit_file schema to describe.
        #[arg(long, default_value = "search_replace_multi")]
        mode: String,
    },
    /// Print, for every component, exactly what it is and what each of its calls may touch.
    Audit {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Run one call with <DIR> as the tool's only directory and print the JSON result.
    Call(CallArgs),
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool to run (write_file, edit_file, search_project, read_file, list_files; or any name with --component).
    tool: String,
    /// The tool's single directory grant, mounted at / inside the component: read-write for
    /// write_file/edit_file, read-only for the retrieval tools.
    #[arg(long)]
    dir: PathBuf,
    /// The call's JSON arguments; `-` reads them from stdin.
    #[arg(long)]
    args: String,
    /// The diff_mode (search_replace_multi, search_replace, anchored, off): picks edit_file's schema.
    #[arg(long)]
    mode: Option<String>,
    /// Extra tool settings, KEY=VALUE (e.g. max-search-results-cap=10). Repeatable.
    #[arg(long = "setting", value_name = "KEY=VALUE")]
    settings: Vec<String>,
    /// Run a third-party component file instead of a built-in tool (for tool authors).
    #[arg(long)]
    component: Option<PathBuf>,
    /// With --component: the access its directory grant gets.
    #[arg(long, value_enum, default_value_t = AccessArg::ReadOnly)]
    access: AccessArg,
    /// Append the call's audit record to this file instead of ~/.bb7/tool-calls.jsonl.
    #[arg(long)]
    audit_log: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AccessArg {
    ReadOnly,
    ReadWrite,
}

/// Runs a `tools` subcommand. Exit codes: 0 success, 1 the tool call failed, 2 usage or set-up error.
pub fn run(cmd: ToolsCommand) -> ExitCode {
    let result = match cmd {
        ToolsCommand::List { mode } => list(&mode),
        ToolsCommand::Audit { json } => audit(json),
        ToolsCommand::Call(args) => return call(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("bb7: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn sandbox(audit: Option<AuditLog>) -> anyhow::Result<Sandbox> {
    crate::sandbox::host_sandbox(audit)
}

fn list(mode: &str) -> anyhow::Result<()> {
    let sb = sandbox(None)?;
    let settings = vec![("diff-mode".to_string(), mode.to_string())];
    let mut out = String::new();
    for tool in sb.registry().all_builtins()? {
        let info = sb
            .describe(&tool, &settings)
            .map_err(|e| anyhow::anyhow!("{}: {e}", tool.name))?;
        let first = first_sentence(&info.description);
        out.push_str(&format!("{:<16} {}\n", info.name, first));
    }
    print!("{out}");
    Ok(())
}

/// The first sentence of a description (the whole first line when it has no sentence break).
fn first_sentence(text: &str) -> &str {
    let line = text.lines().next().unwrap_or("");
    match line.find(". ") {
        Some(i) => &line[..=i],
        None => line,
    }
}

fn audit(as_json: bool) -> anyhow::Result<()> {
    let sb = sandbox(None)?;
    let components = sb.registry().all_builtins()?;
    let limits = sb.limits();
    let exe = std::env::current_exe()
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "bb7".into());
    let report: Vec<Value> = components
        .iter()
        .map(|c| component_json(c, limits, &exe))
        .collect();
    if as_json {
        let doc = json!({
            "bb7_version": crate::VERSION,
            "runtime": "wasmtime 48.0.8 (component model, WASI Preview 2)",
            "components": report,
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let mut out = format!(
        "bb7 {} — {} tool components, run in wasmtime 48.0.8 (WASI Preview 2).\n\
         Every call runs in a fresh instance that holds only the capabilities listed here;\n\
         anything not listed (other directories, network, environment, host stdio) is not granted.\n",
        crate::VERSION,
        components.len()
    );
    for c in &components {
        out.push_str(&format!(
            "\n{name}\n  origin        built-in, embedded in {exe}\n  interface     bb7:tool/tool@{wit}\n  sha256        {sha}\n  size          {size} bytes\n  directory     / = {dir}\n  access        {access}\n  network       none (no sockets, no name lookup)\n  environment   none (no variables, no arguments)\n  stdio         none (stdin empty, stdout and stderr discarded)\n  imports       {imports}\n  limits        memory {mem} MiB, wall time {ms} ms per call, result {res} KiB\n",
            name = c.name,
            wit = c.wit_version.as_str(),
            sha = c.sha256,
            size = c.size,
            dir = c.policy.directory,
            access = access_sentence(c.policy.access),
            imports = c.imports.join("\n                "),
            mem = limits.memory_bytes >> 20,
            ms = limits.wall_time.as_millis(),
            res = limits.result_bytes >> 10,
        ));
    }
    print!("{out}");
    Ok(())
}

fn access_sentence(a: Access) -> &'static str {
    match a {
        Access::ReadOnly => {
            "read-only (list and read; every create, write, rename, link or delete is refused)"
        }
        Access::ReadWrite => {
            "read-write (read, create, replace and delete inside the directory only)"
        }
    }
}

fn component_json(c: &ToolComponent, limits: &Limits, exe: &str) -> Value {
    json!({
        "name": c.name,
        "origin": {"kind": "built-in", "binary": exe},
        "wit_version": c.wit_version.as_str(),
        "wit_interface": c.wit_version.export_name(),
        "sha256": c.sha256,
        "size": c.size,
        "grants": {
            "directories": [{"mount": "/", "directory": c.policy.directory, "access": c.policy.access.as_str()}],
            "network": "none",
            "env": "none",
            "args": "none",
            "stdio": "none",
        },
        "imports": c.imports,
        // Where its native code came from: precompiled into this binary when it was built (the
        // norm), the on-disk cache, or compiled by this run (an engine the build did not match).
        "native_code": match c.cache {
            CacheOutcome::Embedded => "precompiled",
            CacheOutcome::Hit => "cached",
            CacheOutcome::Compiled => "compiled",
        },
        "limits": {
            "memory_bytes": limits.memory_bytes,
            "wall_time_ms": limits.wall_time.as_millis() as u64,
            "result_bytes": limits.result_bytes,
        },
    })
}

fn call(a: CallArgs) -> ExitCode {
    match prepare_and_call(a) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bb7: {e:#}");
            ExitCode::from(2)
        }
    }
}

fn prepare_and_call(a: CallArgs) -> anyhow::Result<ExitCode> {
    let arguments = if a.args == "-" {
        let mut s = String::new();
        std::io::stdin().read_to_string(&mut s)?;
        s
    } else {
        a.args.clone()
    };
    let mut settings = Vec::new();
    if let Some(mode) = &a.mode {
        settings.push(("diff-mode".to_string(), mode.clone()));
    }
    for kv in &a.settings {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| anyhow::anyhow!("--setting wants KEY=VALUE, got {kv:?}"))?;
        settings.push((k.to_string(), v.to_string()));
    }
    let audit = a
        .audit_log
        .clone()
        .or_else(crate::paths::audit_log)
        .map(AuditLog::new);
    let sb = sandbox(audit)?;
    let tool: Arc<ToolComponent> = match &a.component {
        Some(path) => {
            let access = match a.access {
                AccessArg::ReadOnly => Access::ReadOnly,
                AccessArg::ReadWrite => Access::ReadWrite,
            };
            Arc::new(sb.registry().load_file(&a.tool, path, access)?)
        }
        None => sb.registry().builtin(&a.tool)?,
    };
    let grant = Grant::new(&a.dir, tool.policy.access)
        .map_err(|e| anyhow::anyhow!("cannot grant {}: {e}", a.dir.display()))?;
    sb.check_grant(&grant)?;
    let (result, _record) = sb.call(&tool, &grant, &settings, &arguments);
    match result {
        Ok(json) => {
            // Re-serialised by the sandbox: always exactly one line of JSON.
            println!("{json}");
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            eprintln!("bb7: {} failed [{}]: {e}", tool.name, e.kind());
            Ok(ExitCode::from(1))
        }
    }
}
