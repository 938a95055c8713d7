#!/bin/sh
# Builds the example tool components and lays each out for `bb7 tools add`:
#   dist/<crate>/<crate_name>.wasm  +  dist/<crate>/bb7-tool.toml
# e.g. `bb7 tools add examples/tool-components/dist/word-count`.
# Checks that each component still carries its manifest as the `bb7-manifest` custom section and that
# it is byte-for-byte the bb7-tool.toml beside it (bb7 refuses a component whose two manifests differ).
# http-fetch embeds none: its manifest lies beside it, for the user to point at the origins they allow.
# Extra arguments go to cargo (e.g. --offline, -j1).
set -eu
cd "$(dirname "$0")"

cargo build --release --target wasm32-wasip2 "$@"

for crate in word-count net-probe generic-types; do
    wasm="target/wasm32-wasip2/release/$(echo "$crate" | tr - _).wasm"
    out="dist/$crate"
    rm -rf "$out"
    mkdir -p "$out"
    cp "$wasm" "$out/"
    cp "$crate/bb7-tool.toml" "$out/"
    if ! python3 inspect.py "$wasm" --section bb7-manifest | cmp -s - "$crate/bb7-tool.toml"; then
        echo "build.sh: $wasm: the bb7-manifest section is missing or differs from $crate/bb7-tool.toml" >&2
        exit 1
    fi
    echo "$out: $(wc -c < "$wasm") bytes, manifest embedded"
done

for crate in http-fetch; do
    wasm="target/wasm32-wasip2/release/$(echo "$crate" | tr - _).wasm"
    out="dist/$crate"
    rm -rf "$out"
    mkdir -p "$out"
    cp "$wasm" "$out/"
    cp "$crate/bb7-tool.toml" "$out/"
    if python3 inspect.py "$wasm" --section bb7-manifest >/dev/null 2>&1; then
        echo "build.sh: $wasm embeds a manifest; http-fetch's lies beside it" >&2
        exit 1
    fi
    echo "$out: $(wc -c < "$wasm") bytes, manifest beside it"
done
