#!/bin/sh
# Builds the example and test hook components: target/wasm32-wasip2/release/<crate_name>.wasm, each
# carrying its manifest as the `bb7-manifest` custom section, so `bb7 tools add <that .wasm>` takes it
# (e.g. `bb7 tools add examples/hooks/target/wasm32-wasip2/release/deny_migrations.wasm`).
# Extra arguments go to cargo (e.g. --offline, -j1).
set -eu
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2 "$@"
ls -l target/wasm32-wasip2/release/*.wasm
