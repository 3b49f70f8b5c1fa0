#!/usr/bin/env bash
# Builds the fuzz targets with cargo-fuzz (libFuzzer) and runs each for a bounded time from its committed seed
# corpus; any crash (a panic, an assertion, an out-of-memory) fails the script and leaves the input in
# fuzz/artifacts/TARGET/. Usage: fuzz/run.sh [SECONDS per target, default 30] [TARGET...]
#
# Works on the stable toolchain as it is: without a sanitizer, cargo-fuzz passes rustc no -Z flag (the decoders
# are safe Rust, where a sanitizer finds nothing a panic would not). Debug assertions are on, so arithmetic
# overflow is a crash too; --dev with the light optimisation in fuzz/Cargo.toml keeps the build short.
# To fuzz under AddressSanitizer instead, stable needs RUSTC_BOOTSTRAP=1 for cargo-fuzz's -Zsanitizer:
#   RUSTC_BOOTSTRAP=1 cargo fuzz run --fuzz-dir fuzz TARGET
set -euo pipefail
cd "$(dirname "$0")/.."

secs=${1:-30}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(hello handshake frame_header rendezvous sizes options)

if ! command -v cargo-fuzz >/dev/null; then
    echo "fuzz/run.sh: installing cargo-fuzz from crates.io"
    cargo install cargo-fuzz --locked
fi

flags=(--fuzz-dir fuzz --sanitizer none --debug-assertions --dev)
cargo fuzz build "${flags[@]}"
for t in "${targets[@]}"; do
    # New inputs go to a scratch folder (first corpus argument), the committed seeds are only read.
    scratch=fuzz/corpus/$t/.new
    mkdir -p "$scratch"
    echo "fuzz/run.sh: $t for ${secs} s"
    cargo fuzz run "${flags[@]}" "$t" "$scratch" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -rss_limit_mb=2048 -max_len=4096 -print_final_stats=1
done
echo "fuzz/run.sh: ${#targets[@]} targets ran ${secs} s each without a crash"
