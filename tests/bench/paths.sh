#!/usr/bin/env bash
# The layers of one cluster's network, measured in one run each: 4 namespace hosts (tests/netns/cluster.sh),
# collbench sweeping the underlay (tcp@eth0) and the VXLAN overlay on top of it (tcp@vxlan0) with whole-sweep
# repeats, once on unshaped links and once with every host's eth0 shaped to 1 Gbit/s (tc tbf).
#
#   tests/bench/paths.sh [OUT]        (root; OUT defaults to results/netns-paths)
#
# Writes OUT/{unshaped,shaped}/: results.json (-J), results.md (--markdown), table.txt (rank 0's stdout),
# stderr.txt, and busbw/latency plots (SVG, `collbench plot`). Nothing here asserts speed: the
# deterministic parts are asserted by tests/netns.rs; this script records what the layers cost.
#
# Environment:
#   COLLBENCH            the binary (default: target/release/collbench, built when COLLBENCH is not set)
#   COLLBENCH_BENCH_ARGS the sweep (default below)
cd "$(dirname "$0")/../.." || exit
name=cbb$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
out=${1:-$repo/results/netns-paths}
hosts=4
default_args="--collective all_reduce,all_gather -b 8 -e 32M -n 10 -w 2 --repeat 3 -T 120"
read -r -a sweep <<<"${COLLBENCH_BENCH_ARGS:-$default_args}"

need_namespaces
need_collbench
trap cleanup EXIT INT TERM

# One run: a rank in every host, bootstrapped through RANK/WORLD_SIZE/MASTER_ADDR, rank 0 writing into $1.
run_case() {
  local dir=$1
  shift
  mkdir -p "$dir"
  rm -f "$dir"/results.json "$dir"/results.md
  run_ranks "$dir" "$hosts" -J "$dir/results.json" --markdown "$dir/results.md" -- "${sweep[@]}" \
    --transport tcp@eth0,tcp@vxlan0 --reference tcp@eth0 "$@" || die "a rank failed (logs in $dir)"
  mv "$dir/rank0.out" "$dir/table.txt"
  mv "$dir/rank0.err" "$dir/stderr.txt"
  rm -f "$dir"/rank*.out "$dir"/rank*.err
  "$COLLBENCH" plot "$dir/results.json" --out "$dir" --format svg >/dev/null
  log "$dir: done"
}

log "unshaped: $hosts hosts, eth0 (MTU 1500) and vxlan0 (MTU 1450) over one software switch"
cluster_up "$hosts"
run_case "$out/unshaped"
cluster_down

log "shaped: every host's eth0 egress at 1 Gbit/s (tbf), the overlay riding on it"
cluster_up "$hosts" --rate 1gbit
run_case "$out/shaped" --line-rate 1
log "wrote $out"
