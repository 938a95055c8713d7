//! Host calls that wasmtime-wasi implements without the limits a tool call needs, shadowed in the
//! linker by versions that keep them:
//!
//! - **Waits end at the call's deadline.** Epoch interruption stops guest code, never a guest that
//!   waits inside a host call (`pollable.block`, `poll`, the `blocking-*` stream methods: a sleep,
//!   a socket that never answers). Each of those waits here at most until the call's wall-time
//!   deadline; past it the call traps as a time-limit failure, its store is dropped on its worker
//!   and everything it held (descriptors, memory, its instance slot) is released at once — the
//!   call is never left blocked for the watchdog to abandon.
//! - **Output is metered as it is written.** A call given an [`OutputBudget`](super::limits::OutputBudget) may write at most
//!   its bytes and create at most its entries (files, directories, links): every way a WASI 0.2
//!   guest can put data or entries on disk goes through one of the functions shadowed here
//!   (`descriptor.write`, the streams of `write-via-stream`/`append-via-stream` — which also carry
//!   `write-zeroes` and `splice` —, `set-size`, `open-at` with `create` (shadowed in `fileread.rs`, which charges it here too), `create-directory-at`,
//!   `symlink-at`, `link-at`). The write that would pass the budget is refused before any of it
//!   reaches the disk and the call traps, so the disk holds at most the budget, whatever the
//!   guest does; the check is the same whether the guest is fast or slow.
//!
//! - **A socket use without a network grant is recorded.** Creating a TCP or UDP socket and
//!   looking a name up note the attempt in the call's `SocketDenials` (`audit.rs`: a `refusal`
//!   record, once per call) before wasmtime-wasi refuses it.
//!
//! Each shadow does its check and then calls wasmtime-wasi's own implementation, so the semantics
//! are otherwise wasmtime-wasi's.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{WasiFilesystemCtxView, WasiFilesystemView as _};
use wasmtime_wasi::p2::bindings::io::poll::{Host as _, HostPollable as _};
use wasmtime_wasi::p2::bindings::io::streams::{
    Host as _, HostInputStream as _, HostOutputStream as _, StreamError as WitStreamError,
};
use wasmtime_wasi::p2::bindings::sync::filesystem::types::{
    Descriptor, ErrorCode, Host as _, HostDescriptor, PathFlags,
};
use wasmtime_wasi::p2::{
    DynInputStream, DynOutputStream, DynPollable, FsResult, OutputStream, Pollable, StreamError,
    StreamResult,
};

use super::limits::OutputBudget;
use super::state::CallState;

/// The WASI 0.2 version the linker's interfaces are defined at (older 0.2.x imports resolve to it).
pub(super) const WASI: &str = "0.2.12";

/// Replaces the waiting and writing host calls of `linker` (which already holds wasmtime-wasi's
/// WASI 0.2 interfaces) by the bounded and metered versions of this module.
pub fn shadow(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    linker.allow_shadowing(true);
    let r = shadow_waits(linker).and_then(|()| shadow_writes(linker));
    linker.allow_shadowing(false);
    r
}

/// Runs `wait` until it completes or the call's deadline passes; past the deadline the call traps
/// (recorded in the state, so the failure reads as the time limit).
fn bounded<R>(
    deadline: Instant,
    hit: &mut bool,
    wait: impl Future<Output = R>,
) -> wasmtime::Result<R> {
    let out = wasmtime_wasi::runtime::in_tokio(async move {
        tokio::time::timeout_at(tokio::time::Instant::from_std(deadline), wait)
            .await
            .ok()
    });
    match out {
        Some(r) => Ok(r),
        None => {
            *hit = true;
            Err(wasmtime::Error::msg(
                "the tool's time limit passed while it waited in a host call",
            ))
        }
    }
}

/// A wasmtime-wasi stream result as the WIT `result<_, stream-error>` (or a trap).
fn stream_result<R>(
    table: &mut wasmtime::component::ResourceTable,
    r: StreamResult<R>,
) -> wasmtime::Result<Result<R, WitStreamError>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) => Ok(Err(table.convert_stream_error(e)?)),
    }
}

fn shadow_waits(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut poll = linker.instance(&format!("wasi:io/poll@{WASI}"))?;
    poll.func_wrap(
        "poll",
        |mut cx: StoreContextMut<'_, CallState>, (list,): (Vec<Resource<DynPollable>>,)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            Ok((bounded(deadline, hit, table.poll(list))??,))
        },
    )?;
    poll.func_wrap(
        "[method]pollable.block",
        |mut cx: StoreContextMut<'_, CallState>, (p,): (Resource<DynPollable>,)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            bounded(deadline, hit, table.block(p))??;
            Ok(())
        },
    )?;

    let mut streams = linker.instance(&format!("wasi:io/streams@{WASI}"))?;
    streams.func_wrap(
        "[method]input-stream.blocking-read",
        |mut cx: StoreContextMut<'_, CallState>, (s, len): (Resource<DynInputStream>, u64)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_read(s, len))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    streams.func_wrap(
        "[method]input-stream.blocking-skip",
        |mut cx: StoreContextMut<'_, CallState>, (s, len): (Resource<DynInputStream>, u64)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_skip(s, len))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-write-and-flush",
        |mut cx: StoreContextMut<'_, CallState>,
         (s, bytes): (Resource<DynOutputStream>, Vec<u8>)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_write_and_flush(s, bytes))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-write-zeroes-and-flush",
        |mut cx: StoreContextMut<'_, CallState>, (s, len): (Resource<DynOutputStream>, u64)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_write_zeroes_and_flush(s, len))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-flush",
        |mut cx: StoreContextMut<'_, CallState>, (s,): (Resource<DynOutputStream>,)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_flush(s))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    streams.func_wrap(
        "[method]output-stream.blocking-splice",
        |mut cx: StoreContextMut<'_, CallState>,
         (dst, src, len): (Resource<DynOutputStream>, Resource<DynInputStream>, u64)| {
            let (deadline, hit, table) = cx.data_mut().waiting();
            let r = bounded(deadline, hit, table.blocking_splice(dst, src, len))?;
            Ok((stream_result(table, r)?,))
        },
    )?;
    Ok(())
}

/// A wasmtime-wasi filesystem result as the WIT `result<_, error-code>` (or a trap).
fn fs_result<R>(
    view: &mut WasiFilesystemCtxView<'_>,
    r: FsResult<R>,
) -> wasmtime::Result<Result<R, ErrorCode>> {
    match r {
        Ok(v) => Ok(Ok(v)),
        Err(e) => Ok(Err(view.convert_error_code(e)?)),
    }
}

/// Charges the call's budget (if it has one) with `charge`.
fn charge(
    cx: &mut StoreContextMut<'_, CallState>,
    charge: impl FnOnce(&OutputBudget) -> wasmtime::Result<()>,
) -> wasmtime::Result<()> {
    match cx.data().output_budget() {
        Some(b) => charge(b),
        None => Ok(()),
    }
}

/// Wraps the output stream `s` just opened in the call's budget (if it has one).
fn metered(
    cx: &mut StoreContextMut<'_, CallState>,
    s: Resource<DynOutputStream>,
) -> wasmtime::Result<Resource<DynOutputStream>> {
    let Some(budget) = cx.data().output_budget().cloned() else {
        return Ok(s);
    };
    let table = cx.data_mut().table();
    let inner = table.delete(s)?;
    let wrapped: DynOutputStream = Box::new(Metered { inner, budget });
    Ok(table.push(wrapped)?)
}

fn shadow_writes(linker: &mut Linker<CallState>) -> wasmtime::Result<()> {
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI}"))?;
    types.func_wrap(
        "[method]descriptor.write",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, buf, offset): (Resource<Descriptor>, Vec<u8>, u64)| {
            charge(&mut cx, |b| b.bytes(buf.len() as u64))?;
            let mut v = cx.data_mut().filesystem();
            let r = HostDescriptor::write(&mut v, fd, buf, offset);
            Ok((fs_result(&mut v, r)?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.write-via-stream",
        |mut cx: StoreContextMut<'_, CallState>, (fd, offset): (Resource<Descriptor>, u64)| {
            let r = {
                let mut v = cx.data_mut().filesystem();
                let r = HostDescriptor::write_via_stream(&mut v, fd, offset);
                fs_result(&mut v, r)?
            };
            Ok((match r {
                Ok(s) => Ok(metered(&mut cx, s)?),
                Err(e) => Err(e),
            },))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.append-via-stream",
        |mut cx: StoreContextMut<'_, CallState>, (fd,): (Resource<Descriptor>,)| {
            let r = {
                let mut v = cx.data_mut().filesystem();
                let r = HostDescriptor::append_via_stream(&mut v, fd);
                fs_result(&mut v, r)?
            };
            Ok((match r {
                Ok(s) => Ok(metered(&mut cx, s)?),
                Err(e) => Err(e),
            },))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.set-size",
        |mut cx: StoreContextMut<'_, CallState>, (fd, size): (Resource<Descriptor>, u64)| {
            // Charged in full: a file grown by set-size reads back as that many bytes.
            charge(&mut cx, |b| b.bytes(size))?;
            let mut v = cx.data_mut().filesystem();
            let r = HostDescriptor::set_size(&mut v, fd, size);
            Ok((fs_result(&mut v, r)?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.create-directory-at",
        |mut cx: StoreContextMut<'_, CallState>, (fd, path): (Resource<Descriptor>, String)| {
            charge(&mut cx, OutputBudget::entry)?;
            let mut v = cx.data_mut().filesystem();
            let r = HostDescriptor::create_directory_at(&mut v, fd, path);
            Ok((fs_result(&mut v, r)?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.symlink-at",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, old, new): (Resource<Descriptor>, String, String)| {
            charge(&mut cx, OutputBudget::entry)?;
            let mut v = cx.data_mut().filesystem();
            let r = HostDescriptor::symlink_at(&mut v, fd, old, new);
            Ok((fs_result(&mut v, r)?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.link-at",
        |mut cx: StoreContextMut<'_, CallState>,
         (fd, old_flags, old, new_fd, new): (
            Resource<Descriptor>,
            PathFlags,
            String,
            Resource<Descriptor>,
            String,
        )| {
            charge(&mut cx, OutputBudget::entry)?;
            let mut v = cx.data_mut().filesystem();
            let r = HostDescriptor::link_at(&mut v, fd, old_flags, old, new_fd, new);
            Ok((fs_result(&mut v, r)?,))
        },
    )?;
    Ok(())
}

/// A file's output stream that charges every byte to the call's budget before it is written
/// (`write-zeroes`, `splice` and the blocking variants all end in [`OutputStream::write`]).
struct Metered {
    inner: DynOutputStream,
    budget: Arc<OutputBudget>,
}

#[wasmtime_wasi::async_trait]
impl Pollable for Metered {
    async fn ready(&mut self) {
        self.inner.ready().await
    }
}

#[wasmtime_wasi::async_trait]
impl OutputStream for Metered {
    fn write(&mut self, bytes: bytes::Bytes) -> StreamResult<()> {
        self.budget
            .bytes(bytes.len() as u64)
            .map_err(StreamError::Trap)?;
        self.inner.write(bytes)
    }

    fn flush(&mut self) -> StreamResult<()> {
        self.inner.flush()
    }

    fn check_write(&mut self) -> StreamResult<usize> {
        self.inner.check_write()
    }

    async fn cancel(&mut self) {
        self.inner.cancel().await
    }
}

/// Shadows the WASI 0.2 calls that start any socket use — creating a TCP or UDP socket, looking a
/// name up — in `linker` (which holds wasmtime-wasi's `wasi:sockets`) by versions that first note
/// the attempt in the call's [`super::audit::SocketDenials`] (calls without a network grant), then do what
/// wasmtime-wasi does (which, without a grant, refuses).
pub(super) fn shadow_socket_entries(
    linker: &mut wasmtime::component::Linker<super::state::CallState>,
) -> wasmtime::Result<()> {
    use wasmtime::StoreContextMut;
    use wasmtime::component::Resource;
    use wasmtime_wasi::p2::bindings::sockets::network::{
        ErrorCode, Host as _, IpAddressFamily, Network,
    };
    use wasmtime_wasi::p2::bindings::sockets::{ip_name_lookup, tcp_create_socket};
    use wasmtime_wasi::p2::bindings::sync::sockets::udp_create_socket;
    use wasmtime_wasi::p2::{SocketResult, TcpSocket, UdpSocket};
    use wasmtime_wasi::sockets::WasiSocketsView as _;

    type Cx<'a> = StoreContextMut<'a, super::state::CallState>;
    /// A wasmtime-wasi result as the WIT `result<_, error-code>` (or a trap).
    fn wit<R>(cx: &mut Cx<'_>, r: SocketResult<R>) -> wasmtime::Result<(Result<R, ErrorCode>,)> {
        match r {
            Ok(v) => Ok((Ok(v),)),
            Err(e) => Ok((Err(cx.data_mut().sockets().convert_error_code(e)?),)),
        }
    }
    let wasi = WASI;
    linker.allow_shadowing(true);
    let r = (|| -> wasmtime::Result<()> {
        linker
            .instance(&format!("wasi:sockets/tcp-create-socket@{wasi}"))?
            .func_wrap(
                "create-tcp-socket",
                |mut cx: Cx<'_>, (family,): (IpAddressFamily,)| {
                    cx.data_mut()
                        .socket_attempt(&format!("create-tcp-socket {family:?}"));
                    let r: SocketResult<Resource<TcpSocket>> =
                        tcp_create_socket::Host::create_tcp_socket(
                            &mut cx.data_mut().sockets(),
                            family,
                        );
                    wit(&mut cx, r)
                },
            )?;
        linker
            .instance(&format!("wasi:sockets/udp-create-socket@{wasi}"))?
            .func_wrap(
                "create-udp-socket",
                |mut cx: Cx<'_>, (family,): (IpAddressFamily,)| {
                    cx.data_mut()
                        .socket_attempt(&format!("create-udp-socket {family:?}"));
                    let r: SocketResult<Resource<UdpSocket>> =
                        udp_create_socket::Host::create_udp_socket(
                            &mut cx.data_mut().sockets(),
                            family,
                        );
                    wit(&mut cx, r)
                },
            )?;
        linker
            .instance(&format!("wasi:sockets/ip-name-lookup@{wasi}"))?
            .func_wrap(
                "resolve-addresses",
                |mut cx: Cx<'_>, (network, name): (Resource<Network>, String)| {
                    cx.data_mut().socket_attempt(&format!(
                        "resolve-addresses {:?}",
                        name.chars().take(200).collect::<String>()
                    ));
                    let r = ip_name_lookup::Host::resolve_addresses(
                        &mut cx.data_mut().sockets(),
                        network,
                        name,
                    );
                    wit(&mut cx, r)
                },
            )?;
        Ok(())
    })();
    linker.allow_shadowing(false);
    r
}
