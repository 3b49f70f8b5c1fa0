#!/usr/bin/env bash
# The nccl path's host cost per call, on the fake CUDA driver and NCCL of tests/gpu/fake/ (which queue a
# collective as a host-memory copy and run it when the host waits): all_reduce of 8 B with many timed
# iterations, so each call's time is what the host does around it (collbench's bookkeeping, the library's
# launch, the waits), not what a GPU or network does. Run on two binaries (before and after a change) it
# shows what the change cost or saved per call; on a real GPU, tests/gpu/device-check.sh measures.
#
#   tests/bench/nccl-overhead.sh            (no root, no GPU; needs g++)
#
# Prints one line per binary and -z mode: the median over REPEATS runs of the out-of-place and in-place time
# per call (us), as the JSON records them. Nothing here asserts a speed.
#
# Environment:
#   COLLBENCH        the binary (default: target/release/collbench, built with --features cuda when unset)
#   COLLBENCH_BASE   a second binary to measure beside it (e.g. a build of the commit before a change)
#   ITERS            timed calls per point (default 20000); WARMUP (default 1000); REPEATS (default 5)
#   MODES            -z values to run (default "0 1")
cd "$(dirname "$0")/../.." || exit
name=unused$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
iters=${ITERS:-20000}
warmup=${WARMUP:-1000}
repeats=${REPEATS:-5}
read -r -a modes <<<"${MODES:-0 1}"

need_collbench --features cuda
fakes=$(mktemp -d)
trap 'rm -rf "$fakes"' EXIT INT TERM
for pair in cuda:libcuda.so.1 nvrtc:libnvrtc.so nccl:libnccl.so.2 nvml:libnvidia-ml.so.1; do
  g++ -std=c++17 -O2 -Wno-unknown-pragmas -shared -fPIC -o "$fakes/${pair#*:}" "tests/gpu/fake/${pair%%:*}.cpp" -ldl ||
    die "g++ could not build tests/gpu/fake/${pair%%:*}.cpp"
done
ln -s libcuda.so.1 "$fakes/libcuda.so"

# The median time per call (us) of REPEATS runs of BINARY with -z MODE: "out-of-place in-place".
per_call() {
  local bin=$1 mode=$2 i json
  for ((i = 0; i < repeats; i++)); do
    json=$fakes/run-$i.json
    rm -f "$json"
    LD_LIBRARY_PATH=$fakes COLLBENCH_NCCL_LIB=$fakes/libnccl.so.2 "$bin" run --np 1 --memory cuda --transport nccl \
      --collective all_reduce -b 8 -e 8 -w "$warmup" -n "$iters" -c 0 -z "$mode" --no-progress -J "$json" \
      >/dev/null 2>"$fakes/stderr" || die "$bin -z $mode failed: $(tail -3 "$fakes/stderr")"
  done
  python3 - "$fakes" "$repeats" <<'PY'
import json, statistics, sys
d, n = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{d}/run-{i}.json"))["results"][0] for i in range(n)]
med = lambda p: statistics.median(r[p]["time"] for r in runs)
print(f"{med('out_of_place'):.3f} {med('in_place'):.3f}")
PY
}

printf '%-40s %4s %12s %12s\n' binary "-z" "oop us/call" "ip us/call"
for bin in "$COLLBENCH" ${COLLBENCH_BASE:+"$COLLBENCH_BASE"}; do
  for mode in "${modes[@]}"; do
    read -r oop ip < <(per_call "$bin" "$mode")
    printf '%-40s %4s %12s %12s\n' "$bin" "$mode" "$oop" "$ip"
  done
done
log "all_reduce of 8 B, $iters timed calls after $warmup warm-up, median of $repeats runs, on the fake libraries"
