# shellcheck shell=bash
# What the benchmarks in tests/bench have in common: strict mode, log/die, the root and namespace checks,
# the binary under test, and the one namespace cluster each script builds (tests/netns/cluster.sh).
#
# Sourced by each script after it has changed to the repository root and named its cluster:
#   cd "$(dirname "$0")/../.." || exit
#   name=cbX$$
#   source tests/bench/lib.sh
# Log lines are prefixed with the script's name without .sh.
set -euo pipefail
shopt -s inherit_errexit
repo=$PWD
harness=$repo/tests/netns/cluster.sh
bench=$(basename "$0" .sh)
# The cluster of this run (cluster_up, cluster_down, cleanup, run_ranks); its hosts' names are in the records.
: "${name:?set name, the cluster of this run, before sourcing tests/bench/lib.sh}"

log() { printf '%s: %s\n' "$bench" "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}

# Dies unless this runs as root on a machine that can build namespace clusters.
need_namespaces() {
  [[ $(id -u) == 0 ]] || die "needs root to build network namespaces (run as root)"
  bash "$harness" check >/dev/null || die "this machine cannot build namespace clusters: $(bash "$harness" check 2>&1 | tail -1)"
}

# Sets COLLBENCH to the binary under test: as the environment gives it, else target/release/collbench built
# with `cargo build --release ARGS`. Dies unless it is an executable.
# shellcheck disable=SC2120 # ARGS are the build's (such as --features mpi), not the script's.
need_collbench() {
  if [[ -z ${COLLBENCH:-} ]]; then
    cargo build --release "$@" --quiet
    COLLBENCH=$repo/target/release/collbench
  fi
  [[ -x $COLLBENCH ]] || die "COLLBENCH=$COLLBENCH is not an executable"
}

# Builds the cluster with HOSTS hosts: cluster_up HOSTS [cluster.sh up flags such as --rate 1gbit].
cluster_up() { bash "$harness" up "$name" "$@" --owner $$ >/dev/null; }
# Removes the cluster.
cluster_down() { bash "$harness" down "$name" >/dev/null; }
# Removes the cluster if it is up, quietly; for the scripts' exit traps.
cleanup() { bash "$harness" down "$name" >/dev/null 2>&1 || true; }

# Runs `collbench run ARGS` as one rank in each of the first HOSTS hosts, bootstrapped through
# RANK/WORLD_SIZE/MASTER_ADDR (rendezvous on h0's eth0, port 29500), rank h's output in DIR/rank$h.out and
# .err; RANK0_ARGS (such as -J FILE) go to rank 0 only, last. Logs each failed rank; fails if any did.
#   run_ranks DIR HOSTS [RANK0_ARGS...] -- ARGS...
run_ranks() {
  local dir=$1 hosts=$2 rank0=() master pids=() h rc=0
  shift 2
  while [[ $1 != -- ]]; do
    rank0+=("$1")
    shift
  done
  shift
  master=$(bash "$harness" addr "$name" 0 eth0) || return
  for ((h = 0; h < hosts; h++)); do
    local files=()
    ((h == 0)) && files=("${rank0[@]}")
    RANK=$h WORLD_SIZE=$hosts MASTER_ADDR=$master MASTER_PORT=29500 COLLBENCH_JOB_ID="$name" \
      bash "$harness" exec "$name" "$h" "$COLLBENCH" run "$@" "${files[@]}" \
      >"$dir/rank$h.out" 2>"$dir/rank$h.err" &
    pids+=($!)
  done
  for h in "${!pids[@]}"; do
    wait "${pids[$h]}" || {
      rc=$?
      log "rank $h exited $rc: $(tail -3 "$dir/rank$h.err")"
    }
  done
  ((rc == 0))
}
