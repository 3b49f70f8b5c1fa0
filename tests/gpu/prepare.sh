#!/usr/bin/env bash
# Builds what a GPU machine needs from this side, with no Rust there: the release binary with the cuda
# feature, stripped (its line tables make it about 45 MB; stripped it is about 6 MB), as
# target/gpu-carry/collbench. Then says how much the working tree and the binary weigh together, for
# copying both over, and fails when that is over DEVICE_CARRY_MAX_MIB (default 64).
#
# Usage: bash tests/gpu/prepare.sh
# Then, on the GPU machine, from a copy of the working tree holding target/gpu-carry:
#   DEVICE_CHECK_PACK=/some/where/device-check.tar.gz bash tests/gpu/device-check.sh target/gpu-carry/collbench OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --release --features cuda
mkdir -p target/gpu-carry
strip -o target/gpu-carry/collbench target/release/collbench

# Tracked and untracked-not-ignored files: what a copy of the working tree holds (files deleted but still
# tracked are left out).
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
binary=$(stat -c %s target/gpu-carry/collbench)
max_mib=${DEVICE_CARRY_MAX_MIB:-64}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "prepare: target/gpu-carry/collbench $(mib "$binary") MiB (stripped); working tree $(mib "$tree") MiB; together $(mib $((tree + binary))) MiB"
if [ $((tree + binary)) -gt $((max_mib * 1048576)) ]; then
    echo "prepare: together over ${max_mib} MiB (DEVICE_CARRY_MAX_MIB): leave large files out of the copy" >&2
    exit 1
fi
