//! Link-time least privilege: the WASI interfaces a component is offered follow from its grant.
//! A component that imports no `wasi:sockets` gets a linker without them; one that imports them is
//! linked with them, and without a network grant its call's WASI context denies every socket
//! operation (`state.rs`). `wasi:http` is linked only for a component whose manifest requests
//! `http` origins (each request is then checked against the granted ones, `http.rs`). Besides
//! WASI the built-in component is offered `bb7:host/files` (`hostfiles.rs`), which adds no
//! capability; a third-party component importing it, or anything else outside WASI and the
//! contract's types-only interface, is refused (ECOSYSTEM-PROTOCOL.md §5). The checks here word the
//! refusal, naming the import, before wasmtime's linker would fail.

use wasmtime::Engine;
use wasmtime::component::{HasData, Linker, ResourceTable};
use wasmtime_wasi::WasiView;
use wasmtime_wasi::cli::{WasiCli, WasiCliView as _};
use wasmtime_wasi::clocks::{WasiClocks, WasiClocksView as _};
use wasmtime_wasi::filesystem::{WasiFilesystem, WasiFilesystemView as _};
use wasmtime_wasi::random::WasiRandom;

use super::state::CallState;

/// The linker for components with (`network`) or without a network grant.
pub fn linker(engine: &Engine, network: bool) -> anyhow::Result<Linker<CallState>> {
    let mut linker = Linker::new(engine);
    if network {
        wasmtime_wasi::p2::add_to_linker_sync(&mut linker)
            .and_then(|()| super::hostcalls::shadow_socket_entries(&mut linker))
            .map_err(|e| anyhow::anyhow!("linking WASI: {e}"))?;
    } else {
        add_without_sockets(&mut linker).map_err(|e| anyhow::anyhow!("linking WASI: {e}"))?;
    }
    super::hostcalls::shadow(&mut linker)
        .and_then(|()| super::readdir::shadow(&mut linker))
        .and_then(|()| super::fileread::shadow(&mut linker))
        .and_then(|()| super::hostfiles::add(&mut linker))
        .map_err(|e| anyhow::anyhow!("linking WASI: {e}"))?;
    Ok(linker)
}

/// All of WASI p2 and `wasi:http` (its types and `outgoing-handler`), for components that request
/// `http` origins. Sockets are linked as for any importer: without a network grant the call's
/// WASI context denies every socket operation.
pub fn linker_http(engine: &Engine) -> anyhow::Result<Linker<CallState>> {
    let mut linker = linker(engine, true)?;
    wasmtime_wasi_http::p2::add_only_http_to_linker_sync(&mut linker)
        .map_err(|e| anyhow::anyhow!("linking wasi:http: {e}"))?;
    Ok(linker)
}

struct Table;

impl HasData for Table {
    type Data<'a> = &'a mut ResourceTable;
}

/// `wasmtime_wasi::p2::add_to_linker_sync` minus every `wasi:sockets` interface.
fn add_without_sockets(l: &mut Linker<CallState>) -> wasmtime::Result<()> {
    use wasmtime_wasi::p2::bindings::{cli, clocks, filesystem, random, sync};
    type T = CallState;
    clocks::wall_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    clocks::monotonic_clock::add_to_linker::<T, WasiClocks>(l, T::clocks)?;
    filesystem::preopens::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    random::random::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    random::insecure_seed::add_to_linker::<T, WasiRandom>(l, |t| t.ctx().ctx.random())?;
    cli::exit::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::environment::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_input::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_output::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdin::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stdout::add_to_linker::<T, WasiCli>(l, T::cli)?;
    cli::terminal_stderr::add_to_linker::<T, WasiCli>(l, T::cli)?;
    sync::io::error::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    sync::io::poll::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    sync::io::streams::add_to_linker::<T, Table>(l, |t| t.ctx().table)?;
    sync::filesystem::types::add_to_linker::<T, WasiFilesystem>(l, T::filesystem)?;
    Ok(())
}

/// What a component's imports are checked against: its grant and manifest, and whether it is
/// bb7's own built-in component.
#[derive(Debug, Clone, Copy)]
pub struct Offer<'a> {
    /// Its grant has network access (or it imports `wasi:sockets`, linked with every use denied).
    pub network: bool,
    /// Its manifest requests HTTP origins.
    pub http: bool,
    /// The contract's types-only interface (`bb7:tool/types@…`).
    pub own_types: &'a str,
    /// The built-in component embedded in `bb7` (the only one offered `bb7:host/files`).
    pub builtin: bool,
}

/// Why `import` cannot be offered to a component `offer` describes; `None` when it can.
pub fn refusal(import: &str, offer: Offer<'_>) -> Option<String> {
    let Offer {
        network,
        http,
        own_types,
        builtin,
    } = offer;
    if import == own_types || (builtin && import == super::hostfiles::INTERFACE) {
        return None;
    }
    if import.starts_with("wasi:sockets/") {
        return (!network).then(|| {
            format!(
                "the component imports {import}, but it has no network grant (declare network = [\"host:port\", …] in its manifest, and grant it)"
            )
        });
    }
    if import.starts_with("wasi:http/") {
        return (!http).then(|| format!(
            "the component imports {import}, but its manifest requests no http origins: declare them (http = [\"https://api.example.com\", …]) and grant them, or build the component without HTTP (componentize-js/jco: --disable http fetch-event; Rust: do not depend on wasi:http)"
        ));
    }
    if import.starts_with("bb7:host/") {
        return Some(format!(
            "the component imports {import}, which bb7 offers only to its own built-in tools; a third-party tool component may import nothing but WASI and bb7:tool/types (build it without {import})"
        ));
    }
    if !import.starts_with("wasi:") {
        return Some(format!(
            "the component imports {import}; tool components may import nothing but WASI"
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(network: bool, http: bool, builtin: bool) -> Offer<'static> {
        Offer {
            network,
            http,
            own_types: "bb7:tool/types@0.1.0",
            builtin,
        }
    }

    #[test]
    fn a_wasi_http_import_is_refused_naming_how_to_build_without_it() {
        let why = refusal(
            "wasi:http/outgoing-handler@0.2.3",
            offer(true, false, false),
        )
        .expect("refused");
        assert!(why.contains("wasi:http/outgoing-handler@0.2.3"), "{why}");
        assert!(why.contains("--disable http fetch-event"), "{why}");
        assert!(why.contains("http = ["), "{why}");
        // With an http request it is linked (each request is checked against the grant).
        let linked = refusal(
            "wasi:http/outgoing-handler@0.2.3",
            offer(false, true, false),
        );
        assert_eq!(linked, None);
    }

    /// `bb7:host/files` is offered to the built-in component only: any other component importing
    /// it is refused, naming it (ECOSYSTEM-PROTOCOL.md §5), whatever its grant.
    #[test]
    fn bb7_host_files_is_offered_to_the_builtin_component_only() {
        let files = super::super::hostfiles::INTERFACE;
        assert_eq!(refusal(files, offer(false, false, true)), None);
        for (network, http) in [(false, false), (true, false), (true, true)] {
            let why = refusal(files, offer(network, http, false)).expect("refused");
            assert!(why.contains("bb7:host/files@0.1.0"), "{why}");
            assert!(why.contains("only to its own built-in tools"), "{why}");
        }
        // The contract's types-only interface stays allowed for everyone.
        assert_eq!(
            refusal("bb7:tool/types@0.1.0", offer(false, false, false)),
            None
        );
    }
}
