#!/usr/bin/env bash
# The GPU device checks, on a machine with an NVIDIA GPU, from a collbench binary built elsewhere with
# `cargo build --release --features cuda` (no Rust needed here; tests/gpu/prepare.sh builds a stripped copy).
# Bounded: every step runs under `timeout`.
#
# Usage: bash tests/gpu/device-check.sh BINARY [OUTDIR]
#   OUTDIR (default $OUT, else results/gpu/<date>-<host>) receives:
#     machine.txt    nvidia-smi -L and the driver/CUDA versions, hostname, kernel, the libraries used
#     summary.txt    every step's exit status and its summary lines (what the console shows, less the tables)
#     selftest.json  collbench selftest --gpu -J (seed, device, every dtype/op check, verify counts, bandwidth)
#     selftest.txt   its text output
#     info.txt, info.json        collbench info: GPUs with NVML topology (PCIe, NVLink, pairs)
#     run-nccl.json (and .txt)   collbench run --np 1 --memory cuda --transport nccl: every collective,
#                    float/half sum, 16 B to 64 MiB, #wrong 0 asserted
#     gpu-matrix.json (and .txt) collbench gpu-matrix -J (one GPU: its own copy, no pairs)
#     preflight.json, .xml, .prom (and .txt)  collbench preflight --np 1 --memory cuda --transport nccl,tcp:
#                    the GPU's health (NVML) and copy bandwidths, then NCCL and staged tcp on device buffers;
#                    JSON, JUnit and OpenMetrics; exit 0 expected on a healthy GPU (1: a finding, with its cause)
#     run-np2.json, run-np4.json (and .txt)  collbench run --memory cuda over tcp, 2 and 4 local ranks on
#                    the one GPU, every collective, float/half/int32 sum, 16 B to 64 MiB
#     reduce-on-device-np2.json, -np4.json (and .txt)  --reduce-on device: all_reduce and reduce_scatter, every
#                    dtype and op, 16 B to 4 MiB (4 MiB in pieces), reduced by the GPU kernels; #wrong 0 asserted
#     staging-pieces1.json, staging-pieces4.json (and .txt)  2 ranks, all_reduce and all_gather 16-64 MiB with
#                    the staging in one piece and in four: copy time against time waited for copies
#     nccl-tests-build.txt, side-nccltests-COLL-N.txt, side-collbench-COLL-N.txt  nccl-tests built here
#                    against the same libnccl.so.2; its all_reduce_perf and all_gather_perf and collbench under
#                    those names, same flags, 3 runs each in turn; the times size by size, with the ratio
#                    collbench / nccl-tests (tests/gpu/side-by-side.py), in the summary; 0.95-1.05 required
# Exit: the first failing step's status (0 all correct, 1 a wrong result, 2 no usable GPU or nothing to build
# nccl-tests with, 3 NCCL's times through collbench off nccl-tests' by more than 5%), or 124 when a step
# timed out. Each step is bounded by its own timeout and all of them together by DEVICE_CHECK_BUDGET
# seconds (default 480): a step starts with at most what is left, and is skipped (exit 124) under 20 s.
#
# DEVICE_CHECK_PACK=FILE.tar.gz: on exit, however it ends, OUTDIR is also packed into that one archive
#   (for machines from which only a few files can be copied back).
# DEVICE_CHECK_NCCL_TESTS: nccl-tests' source tarball (default: nccl-tests-*.tar.gz beside BINARY, where
#   tests/gpu/prepare.sh puts it), or a folder holding all_reduce_perf and all_gather_perf already built.
# DEVICE_CHECK_SMALL=1: every step at small sizes (up to 1 MiB, selftest 2 iterations), for rehearsals:
#   tests/fake_gpu.rs runs the whole script so against the fake NVIDIA libraries of tests/gpu/fake/, and
#   every step must pass; the nccl-tests step runs only where DEVICE_CHECK_NCCL_TESTS is set.
# DEVICE_CHECK_EMULATE=1: a rehearsal with no GPU libraries at all (tests/cuda.rs runs it): small sizes, the
#   `run --memory cuda` steps on `--emulate-device` (host memory posing as the device); the steps that need
#   a GPU fail with their no-GPU message.
set -uo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
bin=${1:?usage: device-check.sh BINARY [OUTDIR]}
out=${2:-${OUT:-results/gpu/$(date -u +%Y%m%d)-$(hostname -s)}}
mkdir -p "$out"
[ -x "$bin" ] || { echo "device-check: $bin is not an executable collbench binary" >&2; exit 2; }

# Puts the first of DIRS holding a file matching PATTERN on LD_LIBRARY_PATH, unless the loader already
# knows SONAME; says which was taken. Containers often mount the driver under /usr/local/nvidia without
# telling the loader's cache.
libdirs=""
find_lib() {
    local soname=$1 pattern=$2 d
    shift 2
    if [ -n "$soname" ] && ldconfig -p 2>/dev/null | grep -q " $soname "; then
        libdirs+="# $soname: from the loader's cache"$'\n'
        return
    fi
    for d in "$@"; do
        if compgen -G "$d/$pattern" >/dev/null; then
            export LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
            libdirs+="# $pattern: $d"$'\n'
            return
        fi
    done
    local cache=""
    [ -n "$soname" ] && cache="the loader's cache and "
    libdirs+="# $pattern: not found (looked in $cache$*)"$'\n'
}
# Python's wheels (PyTorch installs the CUDA libraries as nvidia-* packages): their lib folders.
wheel_dirs() {
    command -v python3 >/dev/null || return 0
    timeout 30 python3 -c 'import site, glob, sys
for s in site.getsitepackages() + [site.getusersitepackages()]:
    for d in sorted(glob.glob(s + "/nvidia/" + sys.argv[1] + "/lib")):
        print(d)' "$1" 2>/dev/null
}
find_lib libcuda.so.1 'libcuda.so.1' /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64
find_lib libnvidia-ml.so.1 'libnvidia-ml.so.1' /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64
# libnvrtc: collbench compiles its kernels at start-up with it. The toolkit's own first (its CUDA version
# matches the driver's, so its PTX loads), then a wheel's.
mapfile -t nvrtc_wheels < <(wheel_dirs cu13; wheel_dirs cuda_nvrtc)
find_lib "" 'libnvrtc.so*' /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib "${nvrtc_wheels[@]}"

emulate=${DEVICE_CHECK_EMULATE:-0}
small=${DEVICE_CHECK_SMALL:-$emulate}
emu=()
[ "$emulate" = 1 ] && emu=(--emulate-device)
if [ "$small" = 1 ]; then
    # Rehearsal sizes: the same steps and checks in seconds.
    big=1M rod_e=64K stage_b=256K stage_e=1M self_n=2 side_e=1M
else
    big=64M rod_e=8M stage_b=16M stage_e=64M self_n=20 side_e=128M
fi

: >"$out/summary.txt"
# Echoes a line to the console and to summary.txt.
say() { echo "$*" | tee -a "$out/summary.txt"; }
# Runs Python on ARGS (`-` first: the program read from stdin); its lines go to the console and summary.txt;
# its exit status.
summarize() {
    local lines st
    lines=$(timeout 30 python3 "$@" 2>&1)
    st=$?
    [ -n "$lines" ] && say "$lines"
    return "$st"
}
if [ -n "${DEVICE_CHECK_PACK:-}" ]; then
    pack=$(realpath -m "$DEVICE_CHECK_PACK")
    trap 'tar -czf "$pack" -C "$(dirname "$out")" "$(basename "$out")" && echo "device-check: packed $out into $pack"' EXIT
fi

{
    echo "# date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "# host: $(hostname) ($(uname -sr))"
    echo "# nvidia-smi -L:"
    timeout 30 nvidia-smi -L
    echo "# driver, memory, clocks:"
    timeout 30 nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv
    echo "# CUDA version (nvidia-smi):"
    timeout 30 nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9.]*\).*/\1/p'
    echo "# nvcc: $(timeout 30 nvcc --version 2>/dev/null | tail -n2 | head -n1)"
    echo "# LD_LIBRARY_PATH: ${LD_LIBRARY_PATH:-}"
    printf '%s' "$libdirs"
    [ "$small" = 1 ] && echo "# DEVICE_CHECK_SMALL=1: a rehearsal at small sizes"
    [ "$emulate" = 1 ] && echo "# DEVICE_CHECK_EMULATE=1: a rehearsal, the run steps on an emulated device"
} >"$out/machine.txt" 2>&1

budget=${DEVICE_CHECK_BUDGET:-480}
# Seconds a step may take: its own bound, or what is left of the budget if less; 0 when under 20 s are left.
cap() {
    local left=$((budget - SECONDS))
    if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
# Runs a bounded step, or says it was skipped for lack of budget (status 124, like a timeout).
step_run() {
    local limit
    limit=$(cap "$1")
    shift
    if [ "$limit" -eq 0 ]; then
        say "device-check: skipped (budget of ${budget}s spent): $*"
        return 124
    fi
    timeout "$limit" "$@"
}
first_fail() { [ "$rc" -eq 0 ] && rc=$1; }

# libnccl.so.2 for --transport nccl: the loader's, else a wheel's (PyTorch installs nvidia-nccl-cu*).
if [ -z "${COLLBENCH_NCCL_LIB:-}" ] && ! ldconfig -p 2>/dev/null | grep -q ' libnccl.so.2 '; then
    while read -r d; do
        if [ -e "$d/libnccl.so.2" ]; then
            export COLLBENCH_NCCL_LIB=$d/libnccl.so.2
            break
        fi
    done < <(wheel_dirs nccl)
fi
echo "# COLLBENCH_NCCL_LIB: ${COLLBENCH_NCCL_LIB:-libnccl.so.2 from the loader path}" >>"$out/machine.txt"
cat "$out/machine.txt"
rc=0

# Topology through NVML: GPUs, bus ids, NUMA nodes, NVLinks.
step_run 60 "$bin" info -J "$out/info.json" 2>&1 | tee "$out/info.txt"
step=${PIPESTATUS[0]}
say "device-check: info exited $step"
first_fail "$step"

# Reductions, verification and bandwidth: about a minute on an H200; 300 s bounds a hang.
step_run 300 "$bin" selftest --gpu -n "$self_n" -J "$out/selftest.json" 2>&1 | tee "$out/selftest.txt"
step=${PIPESTATUS[0]}
first_fail "$step"

say "device-check: selftest exited $step; results in $out"
if [ -f "$out/selftest.json" ] && command -v python3 >/dev/null; then
    summarize - "$out/selftest.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
bad = [f"{c['dtype']}/{c['op']}" for c in r["reductions"] if c["diff"]["wrong"]]
vbad = [v["dtype"] for v in r["verify"] if v["counted_clean"] or v["counted_corrupted"] != v["corrupted"]]
b = r["bandwidth"]
print(f"summary: {r['device']['name']} (cc {r['device']['capability']}), seed {r['seed']}")
print(f"summary: reductions {len(r['reductions']) - len(bad)}/{len(r['reductions'])} match the CPU" + (f"; WRONG: {' '.join(bad)}" if bad else ""))
print(f"summary: verify kernel {len(r['verify']) - len(vbad)}/{len(r['verify'])} dtypes count right" + (f"; WRONG: {' '.join(vbad)}" if vbad else ""))
print(f"summary: float sum {b['reduce_gbps']:.1f} GB/s vs copy {b['copy_gbps']:.1f} GB/s = {100 * b['ratio']:.1f}% (target {100 * b['target_ratio']:.0f}%): {b['status']}")
PY
fi

# NCCL with one rank on the device buffers: every collective, #wrong 0 required, the path named nccl.
step_run 150 "$bin" run --np 1 --memory cuda --transport nccl --collective all -d float,half -o sum \
    -b 16 -e "$big" -f 4 -w 2 -n 5 -c 1 -J "$out/run-nccl.json" --force 2>&1 | tee "$out/run-nccl.txt"
step=${PIPESTATUS[0]}
say "device-check: run --transport nccl exited $step"
if [ "$step" -eq 0 ] && command -v python3 >/dev/null; then
    summarize - "$out/run-nccl.json" <<'PY' || step=1
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["results"]
wrong = [(r["collective"], r["type"], r["size"]) for r in rows
         for p in ("out_of_place", "in_place") if r[p]["nwrong"] != 0]
colls = sorted({r["collective"] for r in rows})
paths = sorted({r.get("path", "?") for r in rows})
print(f"summary: nccl: {len(rows)} rows, paths {','.join(paths)}, collectives {','.join(colls)}, "
      f"wrong points {len(wrong)}" + (f": {wrong[:5]}" if wrong else ""))
sys.exit(1 if wrong or len(colls) != 7 or paths != ["nccl"] else 0)
PY
fi
first_fail "$step"

# Copy bandwidth per GPU pair (exit 1 = a pair flagged; with one GPU there are none).
step_run 120 "$bin" gpu-matrix -J "$out/gpu-matrix.json" --force 2>&1 | tee "$out/gpu-matrix.txt"
step=${PIPESTATUS[0]}
say "device-check: gpu-matrix exited $step"
first_fail "$step"

# Preflight on the device: the GPU's health and copy bandwidths (NVML, CUDA events), then the collectives'
# phases on device buffers over NCCL and over tcp staged through pinned memory, one rank on the one GPU.
# Exit 0 expected on a healthy GPU; 1 is a finding, printed with its cause.
step_run 200 "$bin" preflight --np 1 --memory cuda --transport nccl,tcp --bandwidth-bytes "$big" --budget 150 \
    -J "$out/preflight.json" --junit "$out/preflight.xml" --metrics "$out/preflight.prom" --force 2>&1 |
    tee "$out/preflight.txt"
step=${PIPESTATUS[0]}
say "device-check: preflight --memory cuda exited $step"
if [ -f "$out/preflight.json" ] && command -v python3 >/dev/null; then
    summarize - "$out/preflight.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
checks = d["checks"]
by = {}
for c in checks:
    by.setdefault(c["path"], []).append(c["verdict"])
print("summary: preflight " + d["verdict"] + ": " + "; ".join(
    f"{p} {len(v)} checks, {v.count('fail')} fail, {v.count('warn')} warn" for p, v in by.items()))
for c in checks:
    if c["verdict"] != "pass" or c["name"] in ("gpu copy bandwidth", "gpu host-to-device", "gpu device-to-host"):
        print(f"summary: {c['verdict'].upper()} {c['name']}: {c['measured']}")
PY
fi
first_fail "$step"

# Collectives on device buffers: 2 and 4 local ranks share the one GPU (device = local rank modulo the
# device count), over collbench's TCP path on loopback. Exit 0 and #wrong 0 on every point are required.
for np in 2 4; do
    step_run 240 "$bin" run --np "$np" --memory cuda --transport tcp --collective all -d float,half,int32 \
        -o sum -b 16 -e "$big" -f 4 -w 2 -n 5 -c 1 "${emu[@]}" -J "$out/run-np$np.json" --force 2>&1 | tee "$out/run-np$np.txt"
    step=${PIPESTATUS[0]}
    say "device-check: run --np $np --memory cuda exited $step"
    if [ "$step" -eq 0 ] && command -v python3 >/dev/null; then
        summarize "$here/summarize-staged.py" run "$out/run-np$np.json" || step=1
    fi
    first_fail "$step"
done

# Reductions on the device: all_reduce and reduce_scatter reduced by the kernels after a host alltoall, every
# dtype and op, 2 and 4 ranks; exit 0 and #wrong 0 required, the algo column device_reduce.
for np in 2 4; do
    step_run 120 "$bin" run --np "$np" --memory cuda --transport tcp --reduce-on device \
        --collective all_reduce,reduce_scatter -d all -o all -b 16 -e "$rod_e" -f 8 -w 1 -n 3 -c 1 "${emu[@]}" \
        -J "$out/reduce-on-device-np$np.json" --force 2>&1 | tee "$out/reduce-on-device-np$np.txt"
    step=${PIPESTATUS[0]}
    say "device-check: run --reduce-on device --np $np exited $step"
    if [ "$step" -eq 0 ] && command -v python3 >/dev/null; then
        summarize - "$out/reduce-on-device-np$np.json" <<'PY' || step=1
import json, sys
rows = json.load(open(sys.argv[1]))["results"]
wrong = [(r["collective"], r["type"], r["redop"], r["size"]) for r in rows
         for p in ("out_of_place", "in_place") if r[p]["nwrong"] != 0]
algos = sorted({r["algo"] for r in rows})
print(f"summary: {sys.argv[1]}: {len(rows)} rows, algos {','.join(algos)}, wrong points {len(wrong)}"
      + (f": {wrong[:5]}" if wrong else ""))
sys.exit(1 if wrong or algos != ["device_reduce"] else 0)
PY
    fi
    first_fail "$step"
done

# Staging overlapped with the network: the same calls in one piece (no overlap) and in the default pieces.
# Recorded, not judged: staging_wait_us against staging_us says how much of the copies the network hid.
for pieces in 1 4; do
    step_run 90 "$bin" run --np 2 --memory cuda --transport tcp --collective all_reduce,all_gather -d float \
        -b "$stage_b" -e "$stage_e" -f 4 -w 2 -n 10 -c 1 "${emu[@]}" --staging-pieces "$pieces" -J "$out/staging-pieces$pieces.json" \
        --force 2>&1 | tee "$out/staging-pieces$pieces.txt"
    step=${PIPESTATUS[0]}
    say "device-check: run --staging-pieces $pieces exited $step"
    if [ "$step" -eq 0 ] && command -v python3 >/dev/null; then
        summarize "$here/summarize-staged.py" pieces "$out/staging-pieces$pieces.json" "$pieces" || step=1
    fi
    first_fail "$step"
done

# NCCL through collbench against nccl-tests on the same GPU and libnccl.so.2 with the same flags: the
# comparison an nccl-tests user makes. nccl-tests is built here from its source (the machine may have no
# network) unless DEVICE_CHECK_NCCL_TESTS names a folder of built programs; each program runs side_reps times,
# in turn, and tests/gpu/side-by-side.py compares the median times size by size.
side_flags=(-b 8 -e "$side_e" -f 2 -g 1 -w 5 -n 20 -c 1)
side_reps=3
nt_env=()

# Builds nccl-tests from the tarball $1 in the folder $2 (its programs in $2/build) against the libnccl.so.2
# collbench loads, for this GPU's compute capability; the build's output goes to nccl-tests-build.txt, and
# nt_env says where its programs find that libnccl and libcudart. Status 2, said why, when a piece is missing.
build_nccl_tests() {
    local tarball=$1 work=$2 lib header cuda cc
    lib=${COLLBENCH_NCCL_LIB:-$(ldconfig -p 2>/dev/null | awk '/ libnccl\.so\.2 / { print $NF; exit }')}
    if [ -z "$lib" ] || [ ! -e "$lib" ]; then
        say "device-check: nccl-tests: no libnccl.so.2 to build against (looked in the loader's cache, PyTorch's wheel and COLLBENCH_NCCL_LIB)"
        return 2
    fi
    lib=$(realpath "$lib")
    # nccl.h: beside the library (a wheel's include/ or a tarball install), else the system's.
    for header in "$(dirname "$lib")/../include/nccl.h" /usr/include/nccl.h /usr/local/include/nccl.h ""; do
        [ -f "$header" ] && break
    done
    if [ -z "$header" ]; then
        say "device-check: nccl-tests: no nccl.h for $lib (looked in $(dirname "$lib")/../include, /usr/include, /usr/local/include)"
        return 2
    fi
    cuda=${CUDA_HOME:-/usr/local/cuda}
    if [ ! -x "$cuda/bin/nvcc" ] && command -v nvcc >/dev/null; then
        cuda=$(dirname "$(dirname "$(realpath "$(command -v nvcc)")")")
    fi
    if [ ! -x "$cuda/bin/nvcc" ]; then
        say "device-check: nccl-tests: no nvcc to build it with (looked in ${CUDA_HOME:-/usr/local/cuda}/bin and on PATH; set CUDA_HOME)"
        return 2
    fi
    cc=$(timeout 30 nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -n1 | tr -d '. ')
    if ! [[ $cc =~ ^[0-9]+$ ]]; then
        say "device-check: nccl-tests: nvidia-smi --query-gpu=compute_cap gave no compute capability"
        return 2
    fi
    # NCCL_HOME as nccl-tests' Makefile wants it (include/nccl.h, lib/libnccl.so), pointing at collbench's NCCL.
    mkdir -p "$work/nccl/include" "$work/nccl/lib" "$work/src"
    ln -s "$(realpath "$header")" "$work/nccl/include/nccl.h"
    ln -s "$lib" "$work/nccl/lib/libnccl.so"
    ln -s "$lib" "$work/nccl/lib/libnccl.so.2"
    nt_env=(LD_LIBRARY_PATH="$work/nccl/lib:$cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")
    if ! tar -xzf "$tarball" -C "$work/src" --strip-components=1; then
        say "device-check: nccl-tests: $tarball does not unpack"
        return 2
    fi
    echo "# nccl-tests from $tarball; NCCL $lib, $header; nvcc $cuda/bin/nvcc; sm_$cc" >"$out/nccl-tests-build.txt"
    step_run 300 make -C "$work/src" -j"$(nproc)" src.build BUILDDIR="$work/build" NCCL_HOME="$work/nccl" \
        CUDA_HOME="$cuda" NVCC_GENCODE="-gencode=arch=compute_$cc,code=sm_$cc" >>"$out/nccl-tests-build.txt" 2>&1
}

# Runs nccl-tests' all_reduce_perf and all_gather_perf and collbench under those names, and compares them.
side_by_side() {
    local src=${DEVICE_CHECK_NCCL_TESTS:-} work dir coll i st step prog
    [ -n "$src" ] || src=$(compgen -G "$(dirname "$bin")/nccl-tests-*.tar.gz" | tail -n1)
    if [ -z "$src" ] || [ ! -e "$src" ]; then
        say "device-check: side by side: no nccl-tests-*.tar.gz beside $bin (tests/gpu/prepare.sh puts it there) and DEVICE_CHECK_NCCL_TESTS unset"
        first_fail 2
        return
    fi
    work=$(mktemp -d)
    dir=$src
    if [ ! -d "$src" ]; then
        build_nccl_tests "$src" "$work"
        st=$?
        say "device-check: nccl-tests build exited $st"
        if [ "$st" -ne 0 ]; then
            [ -f "$out/nccl-tests-build.txt" ] && tail -n 20 "$out/nccl-tests-build.txt"
            rm -rf "$work"
            # Out of time (124), else nothing to compare with (2).
            [ "$st" -eq 124 ] || st=2
            first_fail "$st"
            return
        fi
        dir=$work/build
    fi
    if ! st=$("$bin" install-aliases --mkdir "$work/aliases" 2>&1); then
        say "device-check: side by side: $st"
        rm -rf "$work"
        first_fail 2
        return
    fi
    for coll in all_reduce all_gather; do
        step=0
        for i in $(seq "$side_reps"); do
            for prog in nccltests collbench; do
                if [ "$prog" = nccltests ]; then
                    step_run 120 env "${nt_env[@]}" "$dir/${coll}_perf" "${side_flags[@]}"
                else
                    step_run 120 "$work/aliases/${coll}_perf" "${side_flags[@]}"
                fi >"$out/side-$prog-$coll-$i.txt" 2>&1
                st=$?
                if [ "$st" -ne 0 ]; then
                    say "device-check: side by side: side-$prog-$coll-$i.txt exited $st"
                    # Out of time (124), else a failed run: wrong results or an error, its file says (1).
                    [ "$st" -eq 124 ] || st=1
                    [ "$step" -eq 0 ] && step=$st
                fi
            done
        done
        if [ "$step" -eq 0 ] && [ "$emulate" != 1 ] &&
            ! grep -q "NCCL's collectives on device memory" "$out/side-collbench-$coll-1.txt"; then
            say "device-check: side by side: collbench did not run NCCL here (side-collbench-$coll-1.txt says why)"
            step=2
        fi
        if [ "$step" -eq 0 ]; then
            summarize "$here/side-by-side.py" --name "$coll" --nccl-tests "$out/side-nccltests-$coll-"*.txt \
                --collbench "$out/side-collbench-$coll-"*.txt
            step=$?
            # 1: a ratio outside 0.95-1.05 (the device check's 3); 2: the tables could not be compared.
            [ "$step" -eq 1 ] && step=3
        fi
        say "device-check: side by side $coll exited $step"
        first_fail "$step"
    done
    rm -rf "$work"
}

if [ -z "${DEVICE_CHECK_NCCL_TESTS:-}" ] && [ "$small" = 1 ]; then
    say "device-check: side by side with nccl-tests not run (a rehearsal; DEVICE_CHECK_NCCL_TESTS names a build)"
elif ! command -v python3 >/dev/null; then
    say "device-check: side by side with nccl-tests not run: no python3 to compare the tables"
    first_fail 2
else
    side_by_side
fi
exit "$rc"
