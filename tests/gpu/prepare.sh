#!/usr/bin/env bash
# Builds what a GPU machine needs from this side, with no Rust there: the release binary with the cuda
# feature, stripped (its line tables make it about 45 MB; stripped it is about 6 MB), as
# target/gpu-carry/collbench, and puts nccl-tests' source beside it (the device check builds it there, where
# there may be no network). Then says how much the working tree and target/gpu-carry weigh together, for
# copying both over, and fails when that is over DEVICE_CARRY_MAX_MIB (default 64).
#
# Usage: bash tests/gpu/prepare.sh
#   NCCL_TESTS_TARBALL: nccl-tests' source (default ../shared/peers/nccl-tests-2.19.6.tar.gz, beside the
#   checkout); without it the device check's side-by-side step says it has nothing to build.
# Then, on the GPU machine, from a copy of the working tree holding target/gpu-carry:
#   DEVICE_CHECK_PACK=/some/where/device-check.tar.gz bash tests/gpu/device-check.sh target/gpu-carry/collbench OUTDIR
set -euo pipefail
cd "$(dirname "$0")/../.."

cargo build --release --features cuda
mkdir -p target/gpu-carry
strip -o target/gpu-carry/collbench target/release/collbench
tarball=${NCCL_TESTS_TARBALL:-../shared/peers/nccl-tests-2.19.6.tar.gz}
rm -f target/gpu-carry/nccl-tests-*.tar.gz
if [ -f "$tarball" ]; then
    cp "$tarball" target/gpu-carry/
else
    echo "prepare: no nccl-tests source at $tarball (NCCL_TESTS_TARBALL): the device check's side-by-side step will stop there (exit 2)" >&2
fi

# Tracked and untracked-not-ignored files: what a copy of the working tree holds (files deleted but still
# tracked are left out).
tree=$(git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null | awk '{ s += $1 } END { print s + 0 }')
carry=$(du -sb target/gpu-carry | cut -f1)
max_mib=${DEVICE_CARRY_MAX_MIB:-64}
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
echo "prepare: target/gpu-carry $(mib "$carry") MiB (collbench stripped, nccl-tests' source); working tree $(mib "$tree") MiB; together $(mib $((tree + carry))) MiB"
if [ $((tree + carry)) -gt $((max_mib * 1048576)) ]; then
    echo "prepare: together over ${max_mib} MiB (DEVICE_CARRY_MAX_MIB): leave large files out of the copy" >&2
    exit 1
fi
