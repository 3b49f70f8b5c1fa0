#!/usr/bin/env bash
# collbench in containers, as pods would run it, beside the same sweep as bare processes.
#
#   tests/containers/run.sh
#
# 1. makes sure the Docker engine answers (starts it when root and it does not; stops it again after);
# 2. makes a Debian 12 base image from Debian's packages with mmdebstrap, once per machine (nothing is
#    pulled from a registry), and builds k8s/Containerfile's default target (runtime) on it with the
#    repository as the context: by default with the suite's collbench (cargo build --release --features
#    "mpi rdma cuda") as the build stage's PREBUILT, with COLLBENCH_CONTAINERS_COMPILE=1 compiling it;
# 3. checks the image: its collbench links nothing the runtime packages lack, and has mpi, rdma, cuda;
# 4. starts 4 containers on a private (internal) bridge network, one rank each, bootstrapped through
#    the environment (round 1: RANK, WORLD_SIZE, MASTER_ADDR = rank 0's container name, MASTER_PORT,
#    COLLBENCH_JOB_TOKEN; round 2: the Indexed Job's JOB_COMPLETION_INDEX, COLLBENCH_WORLD_SIZE,
#    COLLBENCH_ROOT and a token file), and checks: every exit status 0, both tables on rank 0, #wrong 0 on every
#    row, 4 ranks with 4 distinct addresses on eth0;
# 5. runs the same sweep as 4 bare processes on loopback (the same checks), in rounds that alternate
#    which side goes first, and prints container busbw / bare busbw per collective and size, each
#    side's best round (a measurement: no pass/fail threshold);
# 6. removes its containers, network, its tag of the image and its files on every exit path (the Debian
#    base, and the image under a key of its inputs, stay for the next run: lib.sh).
#
# Environment:
#   COLLBENCH                  the binary (default target/release/collbench, built with `cargo build
#                              --release --features "mpi rdma cuda"` when COLLBENCH is not set)
#   COLLBENCH_CONTAINERS_COMPILE=1  the image compiles collbench (k8s/Containerfile's build stage as
#                              production runs it); the bare side runs the binary copied out of it
#   COLLBENCH_CONTAINERS_OUT   where results.json, results.md and the logs go (default target/containers)
#   COLLBENCH_CONTAINERS_SWEEP the sweep's flags (default below); --iface is added per side
#   COLLBENCH_CONTAINERS_WAIT  seconds each side may run before it counts as hung (default 180)
#   COLLBENCH_CONTAINERS_ROUNDS rounds per side (default 2); the ratio uses each side's best round
#   CI=true                    never skip: no usable Docker engine is a failure (exit 1)
# Exit: 0 ok; 1 failure; 77 skipped (no usable Docker engine, outside CI).
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
repo=$PWD
t_start=$SECONDS

NRANKS=4
PORT=29500
SWEEP_DEFAULT="--collective all_reduce,all_gather -b 1M -e 32M -f 4 -n 10 -w 2 -T 30"
read -r -a sweep <<<"${COLLBENCH_CONTAINERS_SWEEP:-$SWEEP_DEFAULT}"
wait_s=${COLLBENCH_CONTAINERS_WAIT:-180}
rounds=${COLLBENCH_CONTAINERS_ROUNDS:-2}
out=${COLLBENCH_CONTAINERS_OUT:-$repo/target/containers}

LOG_TAG=containers
# shellcheck source=tests/containers/lib.sh
. "$repo/tests/containers/lib.sh"
[[ $rounds =~ ^[1-9][0-9]?$ ]] || die "COLLBENCH_CONTAINERS_ROUNDS=$rounds: want 1..99"
[[ $wait_s =~ ^[1-9][0-9]*$ ]] || die "COLLBENCH_CONTAINERS_WAIT=$wait_s: want whole seconds"

prepare_run cbct
net=$prefix

# ---- rank 0's table ---------------------------------------------------------------------------------

# parse FILE: one line per table ("T coll path nranks"), per row ("R coll size t_oop wrong_oop t_ip
# wrong_ip"), per rank ("A rank iface addr") and the launcher line ("L bootstrap_s connect_s").
# Columns of a row: size count type redop root time algbw busbw #wrong time algbw busbw #wrong algo.
parse() {
  awk '
    /^# [a-z_]+ on [^ ]+, [0-9]+ ranks$/ { coll = $2; path = $4; sub(/,$/, "", path); print "T", coll, path, $5; next }
    /^# +Rank +[0-9]+ +Pid/ {
      iface = "?"; addr = "?"
      for (i = 1; i < NF; i++) { if ($i == "iface") iface = $(i + 1); if ($i == "addr") addr = $(i + 1) }
      sub(/:[0-9]+$/, "", addr); print "A", $3, iface, addr; next
    }
    /^# Launcher:/ {
      b = "?"; c = "?"
      for (i = 1; i < NF; i++) { if ($i == "bootstrap:") b = $(i + 1); if ($i == "connect:") c = $(i + 1) }
      print "L", b, c; next
    }
    /^#/ { next }
    NF == 14 && coll != "" { print "R", coll, $1, $6, $9, $10, $13 }
  ' "$1"
}

# check_table PARSED IFACE: both collectives, #wrong 0 everywhere, NRANKS ranks on IFACE with
# distinct addresses. Prints what is wrong, nothing when all is well.
check_table() {
  awk -v want_iface="$2" -v nranks="$NRANKS" -v colls="$3" '
    $1 == "T" { tables[$2] = 1; if ($4 != nranks) printf "table %s has %s ranks, not %s\n", $2, $4, nranks }
    $1 == "R" {
      rows[$2]++
      if ($5 !~ /^[0-9]+$/ || $7 !~ /^[0-9]+$/ || $5 + 0 != 0 || $7 + 0 != 0)
        printf "%s at %s B: #wrong %s out-of-place, %s in-place\n", $2, $3, $5, $7
    }
    $1 == "A" {
      ranks++
      if ($3 != want_iface) printf "rank %s on iface %s, not %s\n", $2, $3, want_iface
      if (!($4 in seen)) distinct++
      seen[$4] = 1
    }
    END {
      n = (colls == "all") ? 0 : split(colls, c, ",")
      if (colls == "all" && length(tables) == 0) print "no table"
      for (i = 1; i <= n; i++) {
        if (!(c[i] in tables)) printf "no %s table\n", c[i]
        else if (!rows[c[i]]) printf "the %s table has no rows\n", c[i]
      }
      if (ranks != nranks) printf "%d rank lines in the header, not %d\n", ranks, nranks
      if (distinct != nranks) printf "%d distinct rank addresses, not %d\n", distinct, nranks
    }
  ' "$1"
}

# ---- the run ----------------------------------------------------------------------------------------

ensure_engine
engine_version=$(docker version -f '{{.Server.Version}}' 2>/dev/null || echo "?")
mkdir -p "$out/logs"
rm -f "$out"/logs/*
# 2-3. The image from k8s/Containerfile on a Debian base made here (lib.sh), and the binary of the bare side.
prepare_image "$out/logs/docker-build.log"

log "run $run_id: $version, Docker engine $engine_version$([ -n "$engine_started" ] && echo " (started here: $engine_started)")"

# 4. The containers: an internal bridge network (no route out of it; Docker's DNS resolves the
# containers' names), one rank per container. In the first round rank 0 starts last, so the others
# retry the rendezvous while its name does not resolve yet (as pods start in any order); later rounds
# start it first, so their bootstrap time is the engine's and the network's, not DNS retries.
docker network create --driver bridge --internal --label "$label" "$net" >/dev/null
net_id=$(docker network inspect -f '{{.Id}}' "$net")
mtu="?"

# run_containers ROUND: one sweep in containers; leaves rank 0's table in $work/c-ROUND.parsed.
run_containers() {
  local round=$1 i t names=() order=() code=() fail=() token problems
  for ((i = 0; i < NRANKS; i++)); do names+=("$prefix-$round-r$i"); done
  if [ "$round" = 1 ]; then order=(3 2 1 0); else order=(0 1 2 3); fi
  token=$(hex 16)
  t=$SECONDS
  # Round 1 speaks torchrun's variables, as the image's default user (root, as the MPIJob's workers); round 2
  # exactly what k8s/overlays/indexed-job/job.yaml gives a pod: the completion index, the size, rank 0's
  # name and the token as a mounted secret file, as nobody (its securityContext).
  local tokfile="$work/token-$round"
  printf '%s\n' "$token" >"$tokfile"
  chmod 0444 "$tokfile"
  for i in "${order[@]}"; do
    local ident=()
    if [ "$round" = 1 ]; then
      ident=(-e RANK="$i" -e WORLD_SIZE="$NRANKS" -e MASTER_ADDR="${names[0]}" -e MASTER_PORT="$PORT"
        -e COLLBENCH_JOB_TOKEN="$token")
    else
      ident=(-e JOB_COMPLETION_INDEX="$i" -e COLLBENCH_WORLD_SIZE="$NRANKS" -e COLLBENCH_ROOT="${names[0]}:$PORT"
        -v "$tokfile:/var/run/secrets/collbench/token:ro" -e COLLBENCH_JOB_TOKEN_FILE=/var/run/secrets/collbench/token
        --user 65534:65534)
    fi
    docker run -d --name "${names[i]}" --hostname "${names[i]}" --network "$net" --label "$label" \
      "${ident[@]}" "$img" collbench run "${sweep[@]}" --iface eth0 >/dev/null
  done
  [ "$mtu" != "?" ] || mtu=$(cat "/sys/class/net/br-${net_id:0:12}/mtu" 2>/dev/null || echo "?")
  # In the background, so that a signal reaches the teardown at once (bash runs traps only between
  # foreground commands, and `wait` is one it interrupts).
  timeout "$wait_s" docker wait "${names[@]}" >"$work/codes" &
  bg_pids=($!)
  wait "${bg_pids[0]}" || {
    for i in "${!names[@]}"; do docker logs "${names[i]}" >"$out/logs/container-$round-r$i.log" 2>&1 || true; done
    die "round $round: containers still running after $wait_s s (logs: $out/logs)"
  }
  bg_pids=()
  read -r -a code <<<"$(tr '\n' ' ' <"$work/codes")"
  for ((i = 0; i < NRANKS; i++)); do
    docker logs "${names[i]}" >"$out/logs/container-$round-r$i.out" 2>"$out/logs/container-$round-r$i.err" || true
    [ "${code[i]:-?}" = 0 ] || fail+=("rank $i (${names[i]}) exited ${code[i]:-?}")
  done
  docker rm "${names[@]}" >/dev/null
  if [ ${#fail[@]} -gt 0 ]; then
    for ((i = 0; i < NRANKS; i++)); do
      echo "--- container rank $i (exit ${code[i]:-?}), last lines:" >&2
      tail -n 5 "$out/logs/container-$round-r$i.err" "$out/logs/container-$round-r$i.out" >&2
    done
    die "round $round: $(printf '%s; ' "${fail[@]}")logs: $out/logs"
  fi
  parse "$out/logs/container-$round-r0.out" >"$work/c-$round.parsed"
  problems=$(check_table "$work/c-$round.parsed" eth0 "$(sweep_collectives)")
  if [ -n "$problems" ]; then
    cat "$out/logs/container-$round-r0.out" >&2
    die "round $round: rank 0's table in the containers: $(echo "$problems" | paste -sd ';' -)"
  fi
  log "round $round, containers: $NRANKS ranks on $NRANKS addresses, every exit 0, #wrong 0 ($((SECONDS - t)) s from the first start to the last exit)"
}

# run_bare ROUND: the same sweep as bare processes on this host, over loopback, on a port of their own;
# leaves rank 0's table in $work/b-ROUND.parsed.
run_bare() {
  local round=$1 i rc t port token fail=() problems
  port=$((20000 + RANDOM % 30000))
  token=$(hex 16)
  t=$SECONDS
  for ((i = 0; i < NRANKS; i++)); do
    # Only this bootstrap: variables of an enclosing launcher (mpirun, srun, ...) would contradict it.
    env -u COLLBENCH_RANK -u COLLBENCH_WORLD_SIZE -u COLLBENCH_ROOT -u COLLBENCH_JOB_TOKEN_FILE \
      -u OMPI_COMM_WORLD_RANK -u OMPI_COMM_WORLD_SIZE -u PMI_RANK -u PMI_SIZE -u PMIX_RANK \
      -u SLURM_PROCID -u SLURM_NTASKS -u JOB_COMPLETION_INDEX \
      RANK="$i" WORLD_SIZE="$NRANKS" MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" COLLBENCH_JOB_TOKEN="$token" \
      timeout "$wait_s" "$bin" run "${sweep[@]}" --iface lo \
      >"$out/logs/bare-$round-r$i.out" 2>"$out/logs/bare-$round-r$i.err" &
    bg_pids+=($!)
  done
  for ((i = 0; i < NRANKS; i++)); do
    rc=0
    wait "${bg_pids[i]}" || rc=$?
    [ "$rc" = 0 ] || fail+=("bare rank $i exited $rc$([ "$rc" = 124 ] && echo " (hung past $wait_s s)")")
  done
  bg_pids=()
  if [ ${#fail[@]} -gt 0 ]; then
    for ((i = 0; i < NRANKS; i++)); do tail -n 5 "$out/logs/bare-$round-r$i.err" >&2; done
    die "round $round: $(printf '%s; ' "${fail[@]}")logs: $out/logs"
  fi
  parse "$out/logs/bare-$round-r0.out" >"$work/b-$round.parsed"
  problems=$(check_table "$work/b-$round.parsed" lo "$(sweep_collectives)" | grep -v 'distinct rank addresses' || true)
  [ -z "$problems" ] || die "round $round: rank 0's table, bare: $(echo "$problems" | paste -sd ';' -)"
  log "round $round, bare: every exit 0, #wrong 0 ($((SECONDS - t)) s)"
}

# 5. Rounds, alternating which side goes first, so that a slow spell of the machine does not land
# on one side only.
t3=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  if ((round % 2)); then
    run_containers "$round"
    run_bare "$round"
  else
    run_bare "$round"
    run_containers "$round"
  fi
done
t4=$SECONDS

# 6. The ratio: per collective and size, busbw in the containers over busbw bare, each side's best
# round. busbw is recomputed from the time columns (the table rounds it to 0.01 GB/s): size / time x
# the collective's factor, the mean of out-of-place and in-place as in collbench's footer.
for ((round = 1; round <= rounds; round++)); do
  sed "s/^/c $round /" "$work/c-$round.parsed"
  sed "s/^/b $round /" "$work/b-$round.parsed"
done >"$work/all.parsed"
awk -v n="$NRANKS" -v json="$work/results.json" -v md="$work/results.md" -v rounds="$rounds" \
  -v run_id="$run_id" -v version="$version" -v engine="$engine_version" -v mtu="$mtu" \
  -v sweep="${sweep[*]}" -v base_s="$t_base_s" -v build_s="$t_build_s" -v rounds_s="$((t4 - t3))" \
  -v date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" '
  function factor(c) {
    if (c == "all_reduce") return 2 * (n - 1) / n
    if (c == "all_gather" || c == "reduce_scatter" || c == "alltoall") return (n - 1) / n
    return 1
  }
  function busbw(c, size, t1, t2) { return (size / t1 + size / t2) / 2 / 1000 * factor(c) }
  function list(s, v) { return s (s == "" ? "" : ", ") v }
  # Lines: SIDE ROUND then what parse printed.
  $3 == "T" { path[$1] = $5 }
  $3 == "L" { boot[$1] = list(boot[$1], $4); conn[$1] = list(conn[$1], $5) }
  $3 == "R" {
    k = $4 SUBSEP $5
    v = busbw($4, $5, $6, $8)
    if (!(($1, k) in bw) || v > bw[$1, k]) bw[$1, k] = v
    if ($1 == "c" && !(k in coll)) { order[++npts] = k; coll[k] = $4; size[k] = $5 }
  }
  END {
    printf "| collective | size (B) | container busbw (GB/s) | bare busbw (GB/s) | container / bare |\n" > md
    printf "|---|---:|---:|---:|---:|\n" >> md
    printf "%-14s %10s %16s %12s %16s\n", "collective", "size (B)", "container busbw", "bare busbw", "container/bare"
    pts = ""
    for (i = 1; i <= npts; i++) {
      k = order[i]
      if (!(("b", k) in bw)) continue
      r = bw["c", k] / bw["b", k]
      printf "%-14s %10d %16.3f %12.3f %16.3f\n", coll[k], size[k], bw["c", k], bw["b", k], r
      printf "| %s | %d | %.3f | %.3f | %.3f |\n", coll[k], size[k], bw["c", k], bw["b", k], r >> md
      pts = pts sprintf("%s\n    {\"collective\": \"%s\", \"size\": %d, \"container_busbw\": %.4f, \"bare_busbw\": %.4f, \"ratio\": %.4f}", (pts == "" ? "" : ","), coll[k], size[k], bw["c", k], bw["b", k], r)
      if (size[k] >= 1048576) {
        sum[coll[k]] += r; cnt[coll[k]]++; all += r; nall++
        if (!(coll[k] in seen)) { seen[coll[k]] = 1; colls[++nc] = coll[k] }
      }
    }
    avg = ""
    for (j = 1; j <= nc; j++) {
      c = colls[j]
      printf "%-14s %10s %16s %12s %16.3f\n", c, "avg>=1MiB", "", "", sum[c] / cnt[c]
      printf "| %s | average over sizes >= 1 MiB | | | **%.3f** |\n", c, sum[c] / cnt[c] >> md
      avg = list(avg, sprintf("\"%s\": %.4f", c, sum[c] / cnt[c]))
    }
    if (nall) {
      printf "%-14s %10s %16s %12s %16.3f\n", "all", "avg>=1MiB", "", "", all / nall
      printf "| all | average over sizes >= 1 MiB | | | **%.3f** |\n", all / nall >> md
      avg = list(avg, sprintf("\"all\": %.4f", all / nall))
    }
    printf "\nbest of %d rounds each; container: %s, bridge MTU %s, bootstrap s by round: %s; bare: %s, bootstrap s: %s\n", rounds, path["c"], mtu, boot["c"], path["b"], boot["b"]
    printf "\nRun %s (%s, Docker engine %s), %d ranks, `%s`, best of %d rounds per side. Container: %s on a Docker bridge (MTU %s), bootstrap s by round %s (round 1 starts rank 0 last). Bare: %s, bootstrap s %s.\n", run_id, version, engine, n, sweep, rounds, path["c"], mtu, boot["c"], path["b"], boot["b"] >> md
    printf "{\n  \"run_id\": \"%s\",\n  \"date\": \"%s\",\n  \"collbench\": \"%s\",\n  \"docker_engine\": \"%s\",\n  \"ranks\": %d,\n  \"sweep\": \"%s\",\n  \"rounds\": %d,\n", run_id, date, version, engine, n, sweep, rounds > json
    printf "  \"container\": {\"path\": \"%s\", \"bridge_mtu\": \"%s\", \"bootstrap_s\": [%s], \"connect_s\": [%s]},\n", path["c"], mtu, boot["c"], conn["c"] >> json
    printf "  \"bare\": {\"path\": \"%s\", \"bootstrap_s\": [%s], \"connect_s\": [%s]},\n", path["b"], boot["b"], conn["b"] >> json
    printf "  \"wall_s\": {\"base\": %d, \"image_build\": %d, \"rounds\": %d},\n", base_s, build_s, rounds_s >> json
    printf "  \"points\": [%s\n  ],\n  \"avg_ratio_ge_1MiB\": {%s}\n}\n", pts, avg >> json
  }
' "$work/all.parsed"
mv "$work/results.json" "$out/results.json"
mv "$work/results.md" "$out/results.md"
log "ok in $((SECONDS - t_start)) s; figures in $out/results.json and $out/results.md"
