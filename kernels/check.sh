#!/usr/bin/env bash
# CI check of the GPU kernels without a GPU: every kernels/*.cu compiles to PTX with nvcc (from the
# nvidia-cuda-nvcc wheel), and the embedded source compiles with NVRTC through collbench's own code path
# (the nvidia-cuda-nvrtc wheel's libnvrtc). The wheels live in a venv under target/ so reruns reuse them.
#
# Exit 0: both compiled. Exit 77: pip could not provide the wheels (offline); with CI=true that fails.
# Usage: bash kernels/check.sh   (CARGO_TARGET_DIR, when set, is used for the venv and the cargo test;
# COLLBENCH_FEATURES, default cuda, is the feature list of that test: pass the suite's to reuse its build)
set -euo pipefail
cd "$(dirname "$0")/.."

target=${CARGO_TARGET_DIR:-target}
venv="$target/kernels-venv"
skip() {
    echo "kernels/check.sh: $1" >&2
    if [ "${CI:-}" = true ]; then exit 1; fi
    exit 77
}

if [ ! -x "$venv/bin/pip" ]; then
    timeout 120 python3 -m venv "$venv" || skip "cannot create a Python venv at $venv (apt-get install python3-venv)"
fi
lib_glob() { find "$venv" -path '*/nvidia/cu*/lib/libnvrtc.so.*' ! -name '*builtins*' 2>/dev/null | head -n1; }
nvcc=$(find "$venv" -path '*/nvidia/cu*/bin/nvcc' -type f 2>/dev/null | head -n1 || true)
if [ -z "$nvcc" ] || [ -z "$(lib_glob)" ]; then
    timeout 600 "$venv/bin/pip" install --quiet --disable-pip-version-check nvidia-cuda-nvcc nvidia-cuda-nvrtc \
        || skip "pip could not install nvidia-cuda-nvcc and nvidia-cuda-nvrtc (no network?)"
    nvcc=$(find "$venv" -path '*/nvidia/cu*/bin/nvcc' -type f | head -n1)
fi
[ -n "$nvcc" ] || skip "the nvidia-cuda-nvcc wheel has no nvcc binary"
nvrtc=$(lib_glob)
[ -n "$nvrtc" ] || skip "the nvidia-cuda-nvrtc wheel has no libnvrtc.so"

out="$target/kernels-ptx"
mkdir -p "$out"
# Options as collbench passes to NVRTC (src/reduce/cuda_kernels.rs), for the oldest and a current architecture.
for cu in kernels/*.cu; do
    for arch in compute_80 compute_90; do
        ptx="$out/$(basename "$cu" .cu).$arch.ptx"
        timeout 120 "$nvcc" --ptx -arch="$arch" -fmad=false -prec-div=true -ftz=false -std=c++14 "$cu" -o "$ptx"
        entries=$(grep -c '^.visible .entry' "$ptx")
        echo "kernels/check.sh: $cu -> $ptx ($entries kernels, nvcc $("$nvcc" --version | sed -n 's/.*release \([0-9.]*\).*/\1/p'))"
        [ "$entries" -gt 0 ] || { echo "kernels/check.sh: $cu defines no kernel" >&2; exit 1; }
    done
done

# The same source through NVRTC, as the binary compiles it (the test fails when libnvrtc is missing).
LD_LIBRARY_PATH="$(dirname "$nvrtc")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" COLLBENCH_REQUIRE_NVRTC=1 \
    timeout 1200 cargo test --features "${COLLBENCH_FEATURES:-cuda}" --lib memory::cuda_launch::tests::the_kernels_compile_with_nvrtc
