#!/usr/bin/env bash
# The layers of one cluster's network, measured in one run each: 4 namespace hosts (tests/netns/cluster.sh),
# collbench sweeping the underlay (tcp@eth0) and the VXLAN overlay on top of it (tcp@vxlan0) with whole-sweep
# repeats, once on unshaped links and once with every host's eth0 shaped to 1 Gbit/s (tc tbf).
#
#   tests/bench/paths.sh [OUT]        (root; OUT defaults to results/netns-paths)
#
# Writes OUT/{unshaped,shaped}/: results.json (-J), results.md (--markdown), table.txt (rank 0's stdout),
# stderr.txt, and busbw/latency plots (PNG and SVG, `collbench plot`). Nothing here asserts speed: the
# deterministic parts are asserted by tests/netns.rs; this script records what the layers cost.
#
# Environment:
#   COLLBENCH            the binary (default: target/release/collbench, built when COLLBENCH is not set)
#   COLLBENCH_BENCH_ARGS the sweep (default below)
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
repo=$PWD
out=${1:-$repo/results/netns-paths}
harness=$repo/tests/netns/cluster.sh
hosts=4
port=29500
default_args="--collective all_reduce,all_gather -b 8 -e 32M -n 10 -w 2 --repeat 3 -T 120"
read -r -a sweep <<<"${COLLBENCH_BENCH_ARGS:-$default_args}"

log() { printf 'paths: %s\n' "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

[[ $(id -u) == 0 ]] || die "needs root to build network namespaces (run as root)"
bash "$harness" check >/dev/null || die "this machine cannot build namespace clusters: $(bash "$harness" check 2>&1 | tail -1)"
if [[ -z ${COLLBENCH:-} ]]; then
  cargo build --release --quiet
  COLLBENCH=$repo/target/release/collbench
fi
[[ -x $COLLBENCH ]] || die "COLLBENCH=$COLLBENCH is not an executable"

name=cbb$$
cleanup() { bash "$harness" down "$name" >/dev/null 2>&1 || true; }
trap cleanup EXIT INT TERM

# One run: a rank in every host, bootstrapped through RANK/WORLD_SIZE/MASTER_ADDR, rank 0 writing into $1.
run_case() {
  local dir=$1
  shift
  mkdir -p "$dir"
  rm -f "$dir"/results.json "$dir"/results.md
  local master pids=() h rc=0
  master=$(bash "$harness" addr "$name" 0 eth0)
  for ((h = 0; h < hosts; h++)); do
    local files=()
    ((h == 0)) && files=(-J "$dir/results.json" --markdown "$dir/results.md")
    RANK=$h WORLD_SIZE=$hosts MASTER_ADDR=$master MASTER_PORT=$port \
      bash "$harness" exec "$name" "$h" "$COLLBENCH" run "${sweep[@]}" \
      --transport tcp@eth0,tcp@vxlan0 --reference tcp@eth0 "$@" "${files[@]}" \
      >"$dir/rank$h.out" 2>"$dir/rank$h.err" &
    pids+=($!)
  done
  for h in "${!pids[@]}"; do
    wait "${pids[$h]}" || {
      rc=$?
      log "rank $h exited $rc: $(tail -3 "$dir/rank$h.err")"
    }
  done
  ((rc == 0)) || die "a rank failed (logs in $dir)"
  mv "$dir/rank0.out" "$dir/table.txt"
  mv "$dir/rank0.err" "$dir/stderr.txt"
  rm -f "$dir"/rank*.out "$dir"/rank*.err
  "$COLLBENCH" plot "$dir/results.json" --out "$dir" >/dev/null
  log "$dir: done"
}

log "unshaped: $hosts hosts, eth0 (MTU 1500) and vxlan0 (MTU 1450) over one software switch"
bash "$harness" up "$name" "$hosts" --owner $$ >/dev/null
run_case "$out/unshaped"
bash "$harness" down "$name" >/dev/null

log "shaped: every host's eth0 egress at 1 Gbit/s (tbf), the overlay riding on it"
bash "$harness" up "$name" "$hosts" --rate 1gbit --owner $$ >/dev/null
run_case "$out/shaped" --line-rate 1
log "wrote $out"
