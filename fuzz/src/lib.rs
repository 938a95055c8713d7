//! BB-7's fuzz targets. Each module has `pub fn run(data: &[u8])`, which panics when an invariant
//! breaks. `fuzz_targets/*.rs` wrap them for libFuzzer (see `scripts/fuzz`); the host's test
//! `fuzz_corpus` (tests/fuzz_corpus.rs) runs the same modules over the committed corpus in
//! `fuzz/corpus/<target>/` on every `scripts/test`.

#[cfg(not(feature = "edit-only"))]
pub mod chat_json;
#[cfg(not(feature = "edit-only"))]
pub mod codec;
pub mod edit;
#[cfg(not(feature = "edit-only"))]
pub mod instructions;
#[cfg(not(feature = "edit-only"))]
pub mod sse;

/// A scratch directory for targets that touch files: on tmpfs (`/dev/shm`) when there is one, so the
/// store's fsyncs cost nothing.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::Builder::new().prefix("bb7-fuzz-").tempdir_in(shm)
    {
        return d;
    }
    tempfile::Builder::new()
        .prefix("bb7-fuzz-")
        .tempdir()
        .expect("tempdir")
}
