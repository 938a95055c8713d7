//! `bb7 tools list | audit | call`: what the tool components are, what they may touch, and running one.

use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::agent::hooked::Hooked;
use crate::components::installed::{Status, function_name};
use crate::components::load::{self, CallDir, OutputTo};
use crate::components::manage;
use crate::components::manifest::{self, Capabilities, Files};
use crate::components::view::ViewSlot;
use crate::llm::tool_calls::{ToolCall, ToolCallAssembler};
use crate::sandbox::cache::CacheOutcome;
use crate::sandbox::grant::CallCaps;
use crate::sandbox::registry::Linking;
use crate::sandbox::{Access, AuditLog, Grant, Limits, Sandbox, ToolComponent};
use sha2::{Digest, Sha256};

#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// List the built-in tools with their one-line descriptions (as the sandboxed components give them).
    List {
        /// The diff_mode whose edit_file schema to describe.
        #[arg(long, default_value = "search_replace_multi")]
        mode: String,
    },
    /// Print, for every component, exactly what it is and what each of its calls may touch
    /// (third-party components: requested and granted capabilities side by side).
    Audit {
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
        /// Compare what would be offered to the model in this project with .bb7/tools.lock; exit 1
        /// naming each difference.
        #[arg(long)]
        check: bool,
    },
    /// Install a third-party component (a .wasm with bb7-tool.toml beside it or embedded, or a
    /// directory holding both). Nothing is granted until `bb7 tools grant`.
    Add {
        /// The component file or directory.
        path: PathBuf,
        /// Also enable it for the project of the current directory (offered once granted).
        #[arg(long)]
        project: bool,
    },
    /// Approve capabilities for an installed component (never more than it requests).
    Grant(GrantArgs),
    /// Withdraw a component's grant.
    Revoke {
        /// The component's name.
        name: String,
    },
    /// Uninstall a component (its grant and enabling go with it).
    Remove {
        /// The component's name.
        name: String,
    },
    /// Offer a granted component to the model in this project (agent mode).
    Enable {
        /// The component's name.
        name: String,
    },
    /// Stop offering a component in this project.
    Disable {
        /// The component's name.
        name: String,
    },
    /// Run one call with <DIR> as the tool's only directory and print the JSON result.
    Call(CallArgs),
}

#[derive(Debug, Args)]
pub struct GrantArgs {
    /// The component's name.
    name: String,
    /// Grant everything it requests.
    #[arg(long, conflicts_with_all = ["files", "network", "env", "http"])]
    all: bool,
    /// The filesystem capability: none, project-read or output-write.
    #[arg(long)]
    files: Option<String>,
    /// A host:port it may connect to. Repeatable.
    #[arg(long, value_name = "HOST:PORT")]
    network: Vec<String>,
    /// An environment variable it may read. Repeatable.
    #[arg(long, value_name = "NAME")]
    env: Vec<String>,
    /// An origin (https://host[:port]) its wasi:http requests may go to. Repeatable.
    #[arg(long, value_name = "ORIGIN")]
    http: Vec<String>,
}

#[derive(Debug, Args)]
pub struct CallArgs {
    /// The tool to run: a built-in (write_file, edit_file, search_project, read_file, list_files),
    /// an installed component (run under its grant), or any name with --component.
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
    /// Run a third-party component file instead of a built-in tool (for tool authors). With a
    /// manifest, the call gets exactly what the manifest requests.
    #[arg(long)]
    component: Option<PathBuf>,
    /// With --component and no manifest: the access its directory grant gets.
    #[arg(long, value_enum, default_value_t = AccessArg::ReadOnly)]
    access: AccessArg,
    /// Append the call's audit record to the audit chain in this file instead of ~/.bb7/audit/log.jsonl.
    #[arg(long)]
    audit_log: Option<PathBuf>,
    /// The project the call is made in: its hooks are asked about the call (`pre_tool_call`) and
    /// its result (`post_tool_call`) as in agent mode and `bb7 mcp`; a deny exits 1 with the reason.
    #[arg(long)]
    project: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum AccessArg {
    ReadOnly,
    ReadWrite,
}

/// Runs a `tools` subcommand. Exit codes: 0 success, 1 the tool call failed, 2 usage or set-up error.
pub fn run(cmd: ToolsCommand) -> ExitCode {
    let result: anyhow::Result<()> = match cmd {
        ToolsCommand::List { mode } => list(&mode),
        ToolsCommand::Audit { json, check: true } => return audit_check(json),
        ToolsCommand::Audit { json, check: false } => audit(json),
        ToolsCommand::Call(args) => return call(args),
        ToolsCommand::Add { path, project } => add(&path, project),
        ToolsCommand::Grant(g) => grant(g),
        ToolsCommand::Revoke { name } => manage::revoke(&name, Some(&project()))
            .map(|s| print_status("revoked", &s))
            .map_err(Into::into),
        ToolsCommand::Remove { name } => manage::remove(&name, Some(&project()))
            .map(|_| {
                println!("{name}: removed (its grant and enabling are gone; the lockfile of this project is updated)")
            })
            .map_err(Into::into),
        ToolsCommand::Enable { name } => manage::set_enabled(&name, &project(), true)
            .map(|s| print_status("enabled", &s))
            .map_err(Into::into),
        ToolsCommand::Disable { name } => manage::set_enabled(&name, &project(), false)
            .map(|s| print_status("disabled", &s))
            .map_err(Into::into),
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
    let project = project();
    for st in manage::statuses(Some(&project))? {
        let tools = st.installed.offered_tools();
        let mut lines: Vec<(String, String)> = tools
            .iter()
            .map(|t| {
                (
                    function_name(&st.name, &t.name),
                    first_sentence(&t.description).to_string(),
                )
            })
            .collect();
        if st.installed.is_hook() {
            lines.push((st.name.clone(), hook_line(&st)));
        } else if lines.is_empty() {
            lines.push((format!("{}__?", st.name), String::new()));
        }
        for (function, desc) in &lines {
            out.push_str(&format!(
                "{function:<16} {desc} [third-party {} {}: {}]\n",
                st.name,
                st.installed.version,
                st.state(),
            ));
        }
        out.push_str(&format!(
            "{:<16}   requested {}\n{:<16}   granted   {}\n",
            "",
            st.installed.requested.summary(),
            "",
            granted_summary(&st)
        ));
    }
    print!("{out}");
    Ok(())
}

/// The project the CLI acts on (see [`manage::cli_project`]).
fn project() -> PathBuf {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    manage::cli_project(&cwd)
}

fn print_status(what: &str, s: &Status) {
    println!(
        "{}: {what} — state {} in {}\n  requested  {}\n  granted    {}",
        s.name,
        s.state(),
        project().display(),
        s.installed.requested.summary(),
        granted_summary(s)
    );
}

fn granted_summary(s: &Status) -> String {
    match (&s.granted, s.grant_stale) {
        (Some(g), _) => g.summary(),
        (None, true) => "nothing (the binary changed since it was approved; grant it again)".into(),
        (None, false) => "nothing yet".into(),
    }
}

fn add(path: &std::path::Path, enable: bool) -> anyhow::Result<()> {
    let sb = sandbox(None)?;
    let project = project();
    // Compiling a large component takes seconds: say so (stderr; stdout is the result).
    eprintln!(
        "bb7: compiling {} (at most {} s)…",
        path.display(),
        crate::sandbox::registry::COMPILE_TIME_LIMIT.as_secs()
    );
    let added = manage::add(&sb, path, enable.then_some(project.as_path()))?;
    eprintln!("bb7: compiled in {:.1} s", added.compile_ms / 1000.0);
    let st = &added.status;
    let tool = tool_lines(st, "             ");
    println!(
        "{name} {version} installed (manifest: {origin})\n  sha256     {sha}\n  wit        {wit}\n  tool       {tool}\n  imports    {imports}\n  requests   {req}\n  granted    {granted}",
        name = st.name,
        version = st.installed.version,
        origin = added.manifest_origin,
        sha = added.sha256,
        wit = st.installed.wit,
        imports = st.installed.imports.join("\n             "),
        req = st.installed.requested.summary(),
        granted = granted_summary(st),
    );
    if let Some(note) = &added.note {
        println!("  note       {note}");
    }
    if let Some(old) = &added.replaced {
        println!("  replaced   {old} (its grant does not hold for the new binary)");
    }
    if st.granted.is_none() {
        println!(
            "Nothing is granted. To approve what it requests: bb7 tools grant {} --all",
            st.name
        );
    }
    if enable {
        println!(
            "Enabled for {} (offered to the model once granted).",
            project.display()
        );
    }
    Ok(())
}

fn grant(g: GrantArgs) -> anyhow::Result<()> {
    let caps = if g.all {
        None
    } else if g.files.is_none() && g.network.is_empty() && g.env.is_empty() && g.http.is_empty() {
        anyhow::bail!("say what to grant: --all, or --files, --network, --env and --http");
    } else {
        Some(Capabilities {
            files: match &g.files {
                Some(f) => Files::parse(f)?,
                None => Files::None,
            },
            network: g.network,
            env: g.env,
            http: g.http,
        })
    };
    let st = manage::grant(&g.name, caps, Some(&project()))?;
    print_status("granted", &st);
    Ok(())
}

fn audit_check(as_json: bool) -> ExitCode {
    let project = project();
    match manage::check(&project) {
        Ok(diffs) => {
            if as_json {
                println!(
                    "{}",
                    json!({"project": project.display().to_string(), "ok": diffs.is_empty(), "differences": diffs})
                );
            } else if diffs.is_empty() {
                println!(
                    "{}: .bb7/tools.lock matches what would be offered",
                    project.display()
                );
            } else {
                println!(
                    "{}: .bb7/tools.lock differs from what would be offered:",
                    project.display()
                );
                for d in &diffs {
                    println!("  {d}");
                }
            }
            if diffs.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("bb7: {e}");
            ExitCode::from(2)
        }
    }
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
    let project = project();
    let third = manage::statuses(Some(&project))?;
    if as_json {
        let doc = json!({
            "bb7_version": crate::VERSION,
            "runtime": "wasmtime 48.0.8 (component model, WASI Preview 2)",
            "components": report,
            "project": project.display().to_string(),
            "third_party": third.iter().map(third_party_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&doc)?);
        return Ok(());
    }
    let third_tools: usize = third
        .iter()
        .map(|s| s.installed.offered_tools().len())
        .sum();
    let mut out = format!(
        "bb7 {} — {} built-in and {} third-party tool components ({} tools), run in wasmtime 48.0.8 (WASI Preview 2).\n\
         Every call runs in a fresh instance that holds only the capabilities listed here;\n\
         anything not listed (other directories, network, environment, host stdio) is not granted.\n",
        crate::VERSION,
        components.len(),
        third.len(),
        components.len() + third_tools,
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
    out.push_str(&format!(
        "\nThird-party components ({} installed; project {}):\n",
        third.len(),
        project.display()
    ));
    if third.is_empty() {
        out.push_str("  none (bb7 tools add <file.wasm|dir>)\n");
    }
    for st in &third {
        let i = &st.installed;
        let l = i.effective_limits();
        out.push_str(&format!(
            "\n{name} {version} — {state}\n  origin        added from {src}\n  interface     {wit}\n  tool          {tool}\n  sha256        {sha}\n  size          {size} bytes\n  requested     {req}\n  granted       {granted}\n  enabled here  {enabled}\n  imports       {imports}\n  limits        memory {mem} MiB, wall time {ms} ms per call, result {res} KiB\n",
            name = st.name,
            version = i.version,
            state = st.state(),
            src = i.source,
            wit = if i.is_hook() {
                hook_line(st)
            } else if i.is_generic() {
                "exported functions (a generic component)".to_string()
            } else {
                format!("bb7:tool/tool@{}", i.wit)
            },
            tool = tool_lines(st, "                "),
            sha = i.sha256,
            size = i.size,
            req = i.requested.summary(),
            granted = granted_summary(st),
            enabled = if st.enabled { "yes" } else { "no" },
            imports = import_lines(st).join("\n                "),
            mem = l.memory_bytes >> 20,
            ms = l.wall_time.as_millis(),
            res = l.result_bytes >> 10,
        ));
        for sk in &i.skipped {
            out.push_str(&format!("  skipped       {} ({})\n", sk.export, sk.reason));
        }
    }
    print!("{out}");
    Ok(())
}

/// A component's tools as the model calls them, one per line; a generic component's tool with no
/// description from its manifest or its `package-docs` is marked.
fn tool_lines(st: &Status, indent: &str) -> String {
    st.installed
        .offered_tools()
        .iter()
        .map(|t| {
            let name = function_name(&st.name, &t.name);
            if t.undocumented {
                format!("{name} (undocumented: no description in the manifest or package-docs)")
            } else {
                name
            }
        })
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"))
}

/// A component's imports; `wasi:sockets` without a network grant is linked with every operation
/// denied.
fn import_lines(st: &Status) -> Vec<String> {
    let network = st.granted.as_ref().is_some_and(|g| !g.network.is_empty());
    st.installed
        .imports
        .iter()
        .map(|i| {
            if i.starts_with("wasi:sockets/") && !network {
                format!("{i} (imported, denied)")
            } else {
                i.clone()
            }
        })
        .collect()
}

/// What a hook is, for people: `hook bb7:hook/hook@0.1.0 at pre_tool_call, pre_apply`.
fn hook_line(st: &Status) -> String {
    format!(
        "hook {} at {}",
        manage::HOOK_EXPORT.trim_end_matches("#decide"),
        st.installed.hook.join(", ")
    )
}

fn third_party_json(st: &Status) -> Value {
    let i = &st.installed;
    let l = i.effective_limits();
    json!({
        "name": st.name,
        "kind": if i.is_hook() { "hook" } else { "tool" },
        "hook": i.hook,
        "version": i.version,
        "description": i.description,
        "tool": i.offered_tools().first().map(|t| function_name(&st.name, &t.name)),
        "tools": i.offered_tools().iter().map(|t| json!({
            "name": function_name(&st.name, &t.name),
            "export": t.export,
            "description": t.description,
            "undocumented": t.undocumented,
            "parameters": serde_json::from_str::<Value>(&t.parameters_schema).unwrap_or(Value::Null),
        })).collect::<Vec<_>>(),
        "skipped": i.skipped.iter().map(|s| json!({"export": s.export, "reason": s.reason})).collect::<Vec<_>>(),
        "imports_denied": if st.granted.as_ref().is_none_or(|g| g.network.is_empty()) {
            i.imports.iter().filter(|x| x.starts_with("wasi:sockets/")).cloned().collect::<Vec<_>>()
        } else {
            Vec::new()
        },
        "origin": {"kind": "third-party", "added_from": i.source, "added": i.added},
        "wit_version": i.wit,
        "sha256": i.sha256,
        "size": i.size,
        "imports": i.imports,
        "requested": i.requested,
        "granted": st.granted,
        "grant_stale": st.grant_stale,
        "enabled": st.enabled,
        "state": st.state(),
        "limits": {
            "memory_bytes": l.memory_bytes,
            "wall_time_ms": l.wall_time.as_millis() as u64,
            "result_bytes": l.result_bytes,
        },
    })
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

/// The directory a call of a component granted `files` gets from `--dir` (the mapping agent mode
/// uses, [`load::call_dir`]): a read-only view of it for `project-read` (under the user's deny
/// list), the directory itself for `output-write` — which must then be empty, so the component sees
/// nothing of what is there — and none for `none`.
fn files_dir(files: Files, dir: &std::path::Path, views: &ViewSlot) -> anyhow::Result<CallDir> {
    let settings = || crate::config::load().config().agent.tool_settings();
    Ok(load::call_dir(
        files,
        dir,
        settings,
        views,
        OutputTo::Dir(dir),
    )?)
}

/// The hooks of a `tools call` (`--project`: that project's, asked as the user's action; none
/// without it) around a call of `component` (`None`: a built-in tool).
fn cli_hooks(a: &CallArgs, component: Option<&str>) -> anyhow::Result<Hooked> {
    let root = match &a.project {
        Some(p) => Some(
            p.canonicalize()
                .map_err(|e| anyhow::anyhow!("--project {}: {e}", p.display()))?,
        ),
        None => None,
    };
    Ok(Hooked::new(
        root.as_deref(),
        component,
        crate::audit::Actor::User,
    ))
}

/// The call as the hooks see it: `tool` with `arguments` parsed as the model's calls are.
fn hooked_call(tool: &str, arguments: &str) -> ToolCall {
    let mut calls = ToolCallAssembler::default();
    calls.push(0, Some("cli".into()), Some(tool.to_string()), arguments);
    calls.finish().pop().unwrap_or(ToolCall {
        id: "cli".into(),
        name: tool.to_string(),
        arguments_raw: arguments.to_string(),
        arguments: Ok(Value::Object(Default::default())),
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
    // One call per run, on a tool host of its own (the sandbox and the loaded component).
    let host = crate::toolhost::ToolHost::with_audit(audit);
    let sb = host.sandbox()?;
    // A project-read call's view of --dir, kept until the call ends.
    let views = ViewSlot::default();
    // What an output-write call may write: metered as it writes, as in agent mode.
    let mut output = None;
    // The third-party component the call runs, for the hooks' event (`None`: a built-in tool).
    let mut third_party = None;
    let (tool, caps): (Arc<ToolComponent>, CallCaps) = match &a.component {
        Some(path) => match manifest::locate_optional(path)? {
            // With a manifest: exactly what it requests, linked as it allows (author testing).
            (wasm, bytes, Some((m, _))) => {
                let sha = hex::encode(Sha256::digest(&bytes));
                let linking = Linking {
                    network: !m.requested.network.is_empty(),
                    http: !m.requested.http.is_empty(),
                    limits: Some(m.effective_limits()),
                    third_party: true,
                };
                let tool = sb.registry().load_third_party(
                    &m.name,
                    &wasm,
                    &bytes,
                    &sha,
                    load::policy(m.requested.files),
                    linking,
                )?;
                // A generic component: the tool is one of its exported functions.
                let tool = match tool.generic() {
                    Some(g) => {
                        let f = a.tool.rsplit("__").next().unwrap_or(&a.tool);
                        tool.function(f).ok_or_else(|| {
                            anyhow::anyhow!(
                                "{}: no tool {f} (its tools: {})",
                                m.name,
                                g.functions
                                    .iter()
                                    .map(|f| f.tool.as_str())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )
                        })?
                    }
                    None => tool,
                };
                let dir = files_dir(m.requested.files, &a.dir, &views)?;
                output = dir.limit;
                third_party = Some(m.name.clone());
                (Arc::new(tool), load::call_caps(&m.requested, dir.grant))
            }
            // Without one: every WASI interface is linked, but nothing is granted beyond --dir
            // (sockets are denied at run time).
            (_, _, None) => {
                let access = match a.access {
                    AccessArg::ReadOnly => Access::ReadOnly,
                    AccessArg::ReadWrite => Access::ReadWrite,
                };
                let tool = Arc::new(sb.registry().load_file(&a.tool, path, access)?);
                third_party = Some(a.tool.clone());
                let grant = Grant::new(&a.dir, access)
                    .map_err(|e| anyhow::anyhow!("cannot grant {}: {e}", a.dir.display()))?;
                (tool, CallCaps::dir(grant))
            }
        },
        None if sb.registry().builtin_names().any(|n| n == a.tool) => {
            let tool = sb.registry().builtin(&a.tool)?;
            let grant = Grant::new(&a.dir, tool.policy.access)
                .map_err(|e| anyhow::anyhow!("cannot grant {}: {e}", a.dir.display()))?;
            (tool, CallCaps::dir(grant))
        }
        // An installed component, under its grant.
        None => {
            let statuses = manage::statuses(Some(&project()))?;
            // The component's name, or the tool's as the model calls it (`<component>__<tool>`).
            let (component, function) = match a.tool.split_once("__") {
                Some((c, f)) => (c, Some(f)),
                None => (a.tool.as_str(), None),
            };
            let Some(st) = statuses.iter().find(|s| s.name == component) else {
                anyhow::bail!(
                    "unknown tool: {} (built-in tools: {}; installed components: {})",
                    a.tool,
                    sb.registry().builtin_names().collect::<Vec<_>>().join(", "),
                    if statuses.is_empty() {
                        "none".to_string()
                    } else {
                        statuses
                            .iter()
                            .map(|s| s.name.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    }
                );
            };
            let Some(granted) = st.granted.clone() else {
                anyhow::bail!(
                    "{} has no grant ({}): bb7 tools grant {} …",
                    st.name,
                    st.state(),
                    st.name
                );
            };
            let tools = st.installed.offered_tools();
            let named = match function {
                Some(f) => tools.iter().find(|t| t.name == f),
                None if tools.len() == 1 => tools.first(),
                None => None,
            };
            let Some(named) = named else {
                anyhow::bail!(
                    "{}: {} (its tools: {})",
                    a.tool,
                    if function.is_some() {
                        "no such tool"
                    } else {
                        "the component offers several tools; name one"
                    },
                    tools
                        .iter()
                        .map(|t| function_name(&st.name, &t.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            };
            let tool = host.load_granted(st)?;
            let tool = if tool.generic().is_some() {
                Arc::new(tool.function(&named.name).ok_or_else(|| {
                    anyhow::anyhow!("{}: the component does not export {}", st.name, named.name)
                })?)
            } else {
                tool
            };
            let dir = files_dir(granted.files, &a.dir, &views)?;
            output = dir.limit;
            third_party = Some(st.name.clone());
            (tool, load::call_caps(&granted, dir.grant))
        }
    };
    if let Some(grant) = &caps.dir {
        sb.check_grant(grant)?;
    }
    let hooks = cli_hooks(&a, third_party.as_deref())?;
    let call = hooked_call(&a.tool, &arguments);
    if let Err(denied) = hooks.pre(&call) {
        eprintln!("bb7: {}", denied.tool_error());
        return Ok(ExitCode::from(1));
    }
    let (result, _record) = sb.call_metered(&tool, &caps, output, &settings, &arguments);
    let (ok, text) = match &result {
        Ok(json) => (true, json.to_string()),
        Err(e) => (false, format!("{} failed [{}]: {e}", tool.name, e.kind())),
    };
    if let Err(denied) = hooks.post(&call, ok, &text) {
        eprintln!("bb7: {}", denied.tool_error());
        return Ok(ExitCode::from(1));
    }
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
