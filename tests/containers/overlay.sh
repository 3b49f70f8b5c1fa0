#!/usr/bin/env bash
# collbench in containers on Docker's own overlay network (the VXLAN driver of swarm mode) beside the
# same containers on a Docker bridge.
#
#   tests/containers/overlay.sh
#
# 1. makes sure the Docker engine answers (lib.sh);
# 2. builds the test image as run.sh does (lib.sh: k8s/Containerfile's default target on a Debian base
#    made here; the image run.sh left for the same tree is used as it is);
# 3. puts the engine in a single-node swarm when it is in none (`docker swarm init`, on loopback), and
#    leaves it again on every exit path, only if it joined here; creates an attachable, internal overlay
#    network and an internal bridge network;
# 4. on each network, 4 containers run `collbench info --iface eth0 -J` as one job: the containers
#    reach each other over it, and each one's eth0 is on the network's subnet with the expected MTU
#    (1450 on the overlay: 1500 less VXLAN's 50 bytes);
# 5. runs the same 4-rank sweep on both networks (`-J` per round), in rounds that alternate which goes
#    first, and checks: every exit status 0, #wrong 0 on every row, 4 distinct addresses on the
#    network's subnet in the JSON's rank table; on the overlay it reads the VXLAN device's byte
#    counters after each round;
# 6. prints overlay busbw / bridge busbw per collective and size (each side's best round) and writes
#    results.json, results.md and every round's JSON;
# 7. removes its containers, networks and its tag of the image on every exit path.
#
# Environment:
#   COLLBENCH                 the binary (default target/release/collbench, built with `cargo build
#                             --release --features "mpi rdma cuda"` when COLLBENCH is not set)
#   COLLBENCH_CONTAINERS_COMPILE=1  the image compiles collbench (as run.sh)
#   COLLBENCH_OVERLAY_OUT     where the results and the logs go (default target/containers-overlay)
#   COLLBENCH_OVERLAY_SWEEP   the sweep's flags (default below); --iface and -J are added
#   COLLBENCH_OVERLAY_WAIT    seconds one side of a round may run before it counts as hung (default 180)
#   COLLBENCH_OVERLAY_ROUNDS  rounds per network (default 2); the ratio uses each side's best round
#   CI=true                   never skip: no Docker engine, or an overlay driver that cannot work here,
#                             is a failure (exit 1)
# Exit: 0 ok; 1 failure; 77 skipped (no usable Docker engine, or the overlay cannot work here: the
# message names the step and what the engine said), outside CI.
set -euo pipefail
shopt -s inherit_errexit
cd "$(dirname "$0")/../.."
repo=$PWD
t_start=$SECONDS

NRANKS=4
PORT=29500
# Docker's overlay driver gives its interfaces this MTU unless the network sets one: 1500 less the 50
# bytes of VXLAN's outer Ethernet, IP, UDP and VXLAN headers.
OVERLAY_MTU=1450
SWEEP_DEFAULT="--collective all_reduce,all_gather -b 1M -e 32M -f 4 -n 10 -w 2 -T 30"
read -r -a sweep <<<"${COLLBENCH_OVERLAY_SWEEP:-$SWEEP_DEFAULT}"
wait_s=${COLLBENCH_OVERLAY_WAIT:-180}
rounds=${COLLBENCH_OVERLAY_ROUNDS:-2}
out=${COLLBENCH_OVERLAY_OUT:-$repo/target/containers-overlay}

LOG_TAG=overlay
# shellcheck source=tests/containers/lib.sh
. "$repo/tests/containers/lib.sh"
[[ $rounds =~ ^[1-9][0-9]?$ ]] || die "COLLBENCH_OVERLAY_ROUNDS=$rounds: want 1..99"
[[ $wait_s =~ ^[1-9][0-9]*$ ]] || die "COLLBENCH_OVERLAY_WAIT=$wait_s: want whole seconds"
command -v jq >/dev/null || die "jq is needed to read collbench's JSON (Debian: apt-get install jq)"

prepare_run cbov
nets=(bridge overlay)
declare -A net_name=([bridge]=$prefix-bridge [overlay]=$prefix-overlay) subnet mtu
swarm_joined=""
gwbridge_ours=""

# ---- teardown of the swarm part ---------------------------------------------------------------------

# teardown_extra (called by lib.sh's teardown after this run's containers are gone): the networks, then
# the swarm if this script made the engine join one. An attachable overlay stays in use by the engine's
# attachment task for a moment after its last container is removed, so its removal is retried until a
# deadline.
teardown_extra() {
  local t ok=0 said
  for ((t = 0; t < 60; t++)); do
    [ -z "$(docker network ls -q --filter "label=$label")" ] && break
    docker network ls -q --filter "label=$label" | xargs -r docker network rm >/dev/null 2>&1
    sleep 0.5
  done
  if [ -n "$swarm_joined" ] && [ "$(docker info -f '{{.Swarm.LocalNodeState}}' 2>/dev/null)" != inactive ]; then
    if said=$(docker swarm leave --force 2>&1); then
      log "left the swarm this run made"
    else
      log "docker swarm leave --force failed: $said"
      ok=1
    fi
    # swarm init made docker_gwbridge and leaving does not remove it; it goes if nothing else uses it.
    if [ -n "$gwbridge_ours" ]; then
      docker network rm docker_gwbridge >/dev/null 2>&1 || log "left docker_gwbridge in place (in use)"
    fi
  fi
  return "$ok"
}

# ---- helpers ----------------------------------------------------------------------------------------

# ip4_int ADDR: a dotted IPv4 address as one integer.
ip4_int() {
  local IFS=. a
  read -r -a a <<<"$1"
  echo $(((a[0] << 24) + (a[1] << 16) + (a[2] << 8) + a[3]))
}

# in_subnet ADDR CIDR: whether the IPv4 address ADDR lies in CIDR.
in_subnet() {
  local net=${2%/*} bits=${2#*/} mask
  [[ $1 =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]] || return 1
  mask=$(((0xffffffff << (32 - bits)) & 0xffffffff))
  [ $(($(ip4_int "$1") & mask)) = $(($(ip4_int "$net") & mask)) ]
}

# vxlan_bytes VNI: "TX RX" bytes of the engine's VXLAN device for that VNI ("? ?" when it cannot be
# read: not root, or the engine keeps its namespaces elsewhere). The device lives in a namespace of the
# overlay's own under the engine's /var/run/docker/netns while a container on this node is attached.
vxlan_bytes() {
  local ns found
  for ns in /var/run/docker/netns/*; do
    [ -e "$ns" ] || continue
    found=$(nsenter --net="$ns" ip -d -s -j link show type vxlan 2>/dev/null |
      jq -r --argjson vni "$1" '.[] | select(.linkinfo.info_data.id == $vni) | "\(.stats64.tx.bytes) \(.stats64.rx.bytes)"' 2>/dev/null || true)
    if [ -n "$found" ]; then
      echo "$found"
      return
    fi
  done
  echo "? ?"
}

# vxlan_delta BEFORE AFTER: "TX RX" bytes between two vxlan_bytes readings ("? ?" if either failed).
vxlan_delta() {
  local b a
  read -r -a b <<<"$1"
  read -r -a a <<<"$2"
  if [[ "${b[*]} ${a[*]}" =~ ^[0-9]+\ [0-9]+\ [0-9]+\ [0-9]+$ ]]; then
    echo "$((a[0] - b[0])) $((a[1] - b[1]))"
  else
    echo "? ?"
  fi
}

# start_job SIDE TAG OUTDIR ON_ERROR CMD...: 4 containers on SIDE's network, one rank each, rank 0
# first, bootstrapped through the environment; OUTDIR is mounted at /out. A `docker run` the engine
# refuses is reported through ON_ERROR (die or skip_or_fail). Sets `names`.
start_job() {
  local side=$1 tag=$2 dir=$3 on_error=$4 i token said
  shift 4
  names=()
  for ((i = 0; i < NRANKS; i++)); do names+=("$prefix-$tag-r$i"); done
  token=$(hex 16)
  mkdir -p "$dir"
  chown 65534:65534 "$dir" 2>/dev/null || chmod 0777 "$dir"
  for ((i = 0; i < NRANKS; i++)); do
    if ! said=$(docker run -d --pull never --name "${names[i]}" --hostname "${names[i]}" --network "${net_name[$side]}" \
      --label "$label" --user 65534:65534 -v "$dir:/out" -e RANK="$i" -e WORLD_SIZE="$NRANKS" -e MASTER_ADDR="${names[0]}" \
      -e MASTER_PORT="$PORT" -e COLLBENCH_JOB_TOKEN="$token" "$img" "$@" 2>&1 >/dev/null); then
      "$on_error" "$tag: docker run of rank $i on the $side network ${net_name[$side]} failed; the engine said: $said"
    fi
  done
}

# wait_job SIDE TAG ON_ERROR: waits for the containers of start_job (bounded), keeps their logs, removes
# them; any exit status but 0 goes to ON_ERROR with the failing ranks' last lines.
wait_job() {
  local side=$1 tag=$2 on_error=$3 i code=() fail=() tails=""
  # In the background, so that a signal reaches the teardown at once (bash runs traps only between
  # foreground commands, and `wait` is one it interrupts).
  timeout "$wait_s" docker wait "${names[@]}" >"$work/codes" &
  bg_pids=($!)
  wait "${bg_pids[0]}" || {
    for i in "${!names[@]}"; do docker logs "${names[i]}" >"$out/logs/$tag-r$i.log" 2>&1 || true; done
    die "$tag: containers on the $side network still running after $wait_s s (logs: $out/logs)"
  }
  bg_pids=()
  read -r -a code <<<"$(tr '\n' ' ' <"$work/codes")"
  for ((i = 0; i < NRANKS; i++)); do
    docker logs "${names[i]}" >"$out/logs/$tag-r$i.out" 2>"$out/logs/$tag-r$i.err" || true
    if [ "${code[i]:-?}" != 0 ]; then
      fail+=("rank $i (${names[i]}) exited ${code[i]:-?}")
      tails+=$'\n'"--- rank $i: $(tail -n 3 "$out/logs/$tag-r$i.err" | tr '\n' ' ')"
    fi
  done
  docker rm "${names[@]}" >/dev/null
  if [ ${#fail[@]} -gt 0 ]; then
    "$on_error" "$tag on the $side network ${net_name[$side]}: $(printf '%s; ' "${fail[@]}")logs: $out/logs$tails"
  fi
}

# check_info SIDE FILE: the gathered inventory has NRANKS hosts, each with eth0 on SIDE's subnet at the
# expected MTU (the overlay's; on the bridge, the same MTU on every host). Prints what is wrong.
check_info() {
  local side=$1 file=$2 host m a n=0 mtus=()
  while read -r host m a; do
    n=$((n + 1))
    mtus+=("$m")
    in_subnet "${a%/*}" "${subnet[$side]}" || echo "host $host: eth0 address $a is not on the $side subnet ${subnet[$side]}"
    if [ "$side" = overlay ] && [ "$m" != "$OVERLAY_MTU" ]; then
      echo "host $host: eth0 MTU $m on the overlay, not Docker's overlay default $OVERLAY_MTU"
    fi
  done < <(jq -r '.hosts[] | .host as $h | (.ifaces[] | select(.name == "eth0")) | "\($h) \(.mtu) \(.addrs[0] // "none")"' "$file")
  [ "$n" = "$NRANKS" ] || echo "$n hosts with an eth0 in the inventory, not $NRANKS"
  [ "$(printf '%s\n' "${mtus[@]}" | sort -u | wc -l)" = 1 ] || echo "eth0 MTUs differ between containers: ${mtus[*]}"
  mtu[$side]=${mtus[0]:-?}
}

# check_run SIDE FILE: rank 0's JSON is complete, every row checked with #wrong 0, a row for every
# collective of the sweep, NRANKS ranks on eth0 with distinct addresses on SIDE's subnet. Prints what is
# wrong.
check_run() {
  local side=$1 file=$2 c addr addrs=()
  [ -s "$file" ] || { echo "no JSON file from rank 0"; return; }
  jq -e '.collbench.complete == true' "$file" >/dev/null || echo "the JSON says the run did not complete"
  jq -r '.results[] | select(.out_of_place.nwrong != 0 or .in_place.nwrong != 0)
    | "\(.collective) at \(.size) B: #wrong \(.out_of_place.nwrong) out-of-place, \(.in_place.nwrong) in-place"' "$file"
  if [ "$(sweep_collectives)" = all ]; then
    jq -e '.results | length > 0' "$file" >/dev/null || echo "no rows"
  else
    for c in $(sweep_collectives | tr ',' ' '); do
      jq -e --arg c "$c" '[.results[] | select(.collective == $c)] | length > 0' "$file" >/dev/null || echo "no $c rows"
    done
  fi
  jq -r '.results[] | select(.path != "tcp@eth0") | "a row on path \(.path), not tcp@eth0"' "$file" | sort -u
  while read -r addr; do
    addrs+=("$addr")
    in_subnet "$addr" "${subnet[$side]}" || echo "rank address $addr is not on the $side subnet ${subnet[$side]}"
  done < <(jq -r '.collbench.run.ranks[] | .addr | sub(":[0-9]+$"; "")' "$file")
  jq -r '.collbench.run.ranks[] | select(.iface != "eth0") | "rank \(.rank) on iface \(.iface), not eth0"' "$file"
  [ "${#addrs[@]}" = "$NRANKS" ] || echo "${#addrs[@]} ranks in the rank table, not $NRANKS"
  [ "$(printf '%s\n' "${addrs[@]}" | sort -u | wc -l)" = "$NRANKS" ] || echo "rank addresses not distinct: ${addrs[*]}"
}

# ---- the run ----------------------------------------------------------------------------------------

ensure_engine
engine_version=$(docker version -f '{{.Server.Version}}' 2>/dev/null || echo "?")
mkdir -p "$out/logs"
rm -f "$out"/logs/* "$out"/*.json "$out"/results.md
# The image (lib.sh): k8s/Containerfile's default target on a Debian base made here, as run.sh builds it
# (the same tree and arguments: the image run.sh left is used as it is).
prepare_image "$out/logs/docker-build.log"
log "run $run_id: $version, Docker engine $engine_version$([ -n "$engine_started" ] && echo " (started here: $engine_started)")"

# Swarm membership belongs to the whole engine: a second run of this script that found the swarm made
# by the first would see it vanish when the first leaves. One at a time per machine.
exec {lock_fd}>"${TMPDIR:-/tmp}/collbench-overlay-swarm.lock"
flock -w "$wait_s" "$lock_fd" || die "another overlay test held ${TMPDIR:-/tmp}/collbench-overlay-swarm.lock for $wait_s s"

# 3. The swarm. Advertised and listening on loopback only: one node, nothing to reach from outside.
swarm_state=$(docker info -f '{{.Swarm.LocalNodeState}}')
case $swarm_state in
  inactive)
    [ -n "$(docker network ls -q --filter name='^docker_gwbridge$')" ] || gwbridge_ours=1
    swarm_joined=1
    if ! said=$(docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377 2>&1); then
      skip_or_fail "step 'docker swarm init --advertise-addr 127.0.0.1 --listen-addr 127.0.0.1:2377' failed; the engine said: $said"
    fi
    log "engine joined a single-node swarm (advertised on 127.0.0.1); it leaves it at the end"
    ;;
  active)
    [ "$(docker info -f '{{.Swarm.ControlAvailable}}')" = true ] ||
      skip_or_fail "the engine is a worker of an existing swarm; creating an overlay network needs a manager (docker info: Swarm.ControlAvailable false)"
    log "engine already in a swarm (node $(docker info -f '{{.Swarm.NodeID}}')); using it and leaving it as it is"
    ;;
  *) skip_or_fail "the engine's swarm state is '$swarm_state' (docker info: Swarm.LocalNodeState); this test needs 'inactive' or 'active'" ;;
esac

# 3. The networks, both internal (no route out). The overlay is attachable so that plain `docker run`
# containers (not only swarm services) can join it.
if ! said=$(docker network create --driver overlay --attachable --internal --label "$label" "${net_name[overlay]}" 2>&1); then
  skip_or_fail "step 'docker network create --driver overlay --attachable --internal ${net_name[overlay]}' failed; the engine said: $said"
fi
docker network create --driver bridge --internal --label "$label" "${net_name[bridge]}" >/dev/null
for side in "${nets[@]}"; do
  subnet[$side]=$(docker network inspect -f '{{range .IPAM.Config}}{{.Subnet}}{{end}}' "${net_name[$side]}")
  [[ ${subnet[$side]} =~ ^[0-9.]+/[0-9]+$ ]] || die "the $side network ${net_name[$side]} has no single IPv4 subnet: '${subnet[$side]}'"
done
vni=$(docker network inspect -f '{{index .Options "com.docker.network.driver.overlay.vxlanid_list"}}' "${net_name[overlay]}")
[[ $vni =~ ^[0-9]+$ ]] || vni=0
log "networks: bridge ${net_name[bridge]} ${subnet[bridge]}; overlay ${net_name[overlay]} ${subnet[overlay]}, VXLAN id $vni"

# The engine tears the overlay's namespace (and its VXLAN device, with the byte counters) down when the
# last container on this node leaves, and builds it again for the next: a container that only holds the
# network for the whole run keeps one device to read from, and no round waits on that rebuild.
if ! said=$(docker run -d --pull never --name "$prefix-holder" --network "${net_name[overlay]}" --label "$label" \
  "$img" sleep infinity 2>&1); then
  skip_or_fail "step 'docker run --network ${net_name[overlay]}' (a container attached to the overlay) failed; the engine said: $said"
fi

# 4. Can containers talk over each network? One `collbench info` job of 4 containers per network: the
# ranks meet at rank 0 over eth0 and gather their inventories there. The bridge goes first: a failure
# there is collbench's or the engine's, one only on the overlay is the overlay's.
for side in "${nets[@]}"; do
  on_error=die
  [ "$side" = overlay ] && on_error=skip_or_fail
  start_job "$side" "info-$side" "$work/info-$side" "$on_error" collbench info --iface eth0 -T 60 -J /out/info.json
  wait_job "$side" "info-$side" "$on_error"
  [ -s "$work/info-$side/info.json" ] || die "info on the $side network: no JSON file from rank 0 (logs: $out/logs)"
  check_info "$side" "$work/info-$side/info.json" >"$work/problems"
  [ ! -s "$work/problems" ] || die "info on the $side network: $(paste -sd ';' - <"$work/problems")"
  cp "$work/info-$side/info.json" "$out/info-$side.json"
  log "info on the $side network: $NRANKS containers met at rank 0; eth0 on ${subnet[$side]}, MTU ${mtu[$side]}"
done

# 5. Rounds, alternating which network goes first, so that a slow spell of the machine does not land
# on one side only.
declare -A vxlan_round
t3=$SECONDS
for ((round = 1; round <= rounds; round++)); do
  order=(bridge overlay)
  ((round % 2)) || order=(overlay bridge)
  for side in "${order[@]}"; do
    t=$SECONDS
    tag=$side-$round
    [ "$side" = bridge ] || vxlan_before=$(vxlan_bytes "$vni")
    start_job "$side" "$tag" "$work/$tag" die collbench run "${sweep[@]}" --iface eth0 -J /out/results.json
    wait_job "$side" "$tag" die
    check_run "$side" "$work/$tag/results.json" >"$work/problems"
    [ ! -s "$work/$tag/results.json" ] || cp "$work/$tag/results.json" "$out/$tag.json"
    [ ! -s "$work/problems" ] || die "round $round on the $side network: $(paste -sd ';' - <"$work/problems") (JSON: $out/$tag.json)"
    extra=""
    if [ "$side" = overlay ]; then
      vxlan_round[$round]=$(vxlan_delta "$vxlan_before" "$(vxlan_bytes "$vni")")
      extra=", VXLAN device bytes tx/rx ${vxlan_round[$round]/ //}"
    fi
    log "round $round, $side: $NRANKS ranks on $NRANKS addresses in ${subnet[$side]}, every exit 0, #wrong 0 ($((SECONDS - t)) s$extra)"
  done
done
t4=$SECONDS

# 6. The ratio: per collective and size, the overlay's busbw over the bridge's, each side's best round;
# busbw is the mean of out-of-place and in-place (as collbench's footer).
for ((round = 1; round <= rounds; round++)); do
  for side in "${nets[@]}"; do
    jq -r --arg s "$side" --arg r "$round" '.results[] | [$s, $r, .collective, .size,
      ((.out_of_place.bus_bw + .in_place.bus_bw) / 2)] | @tsv' "$out/$side-$round.json"
  done
done >"$work/points.tsv"
awk -F'\t' '
  { k = $3 SUBSEP $4; if (!(($1, k) in bw) || $5 > bw[$1, k]) bw[$1, k] = $5
    if (!(k in seen)) { seen[k] = 1; order[++n] = k } }
  END {
    for (i = 1; i <= n; i++) {
      k = order[i]; split(k, p, SUBSEP)
      if ((("bridge", k) in bw) && (("overlay", k) in bw) && bw["bridge", k] > 0)
        printf "%s\t%d\t%.4f\t%.4f\t%.4f\n", p[1], p[2], bw["overlay", k], bw["bridge", k], bw["overlay", k] / bw["bridge", k]
    }
  }' "$work/points.tsv" >"$work/ratios.tsv"
[ -s "$work/ratios.tsv" ] || die "no point measured on both networks (see $out/*.json)"

# Bootstrap and connect seconds per round and network, from each run's JSON.
boot_json=$(for side in "${nets[@]}"; do
  for ((round = 1; round <= rounds; round++)); do
    jq -c --arg s "$side" '{side: $s, bootstrap_s: .collbench.run.bootstrap_s, connect_s: .collbench.run.connect_s}' "$out/$side-$round.json"
  done
done | jq -s 'group_by(.side) | map({key: .[0].side, value: {bootstrap_s: map(.bootstrap_s), connect_s: map(.connect_s)}}) | from_entries')
vxlan_json=$(for ((round = 1; round <= rounds; round++)); do
  read -r tx rx <<<"${vxlan_round[$round]}"
  jq -nc --arg tx "$tx" --arg rx "$rx" '{tx_bytes: ($tx | tonumber? // null), rx_bytes: ($rx | tonumber? // null)}'
done | jq -sc .)

jq -n --rawfile ratios "$work/ratios.tsv" --arg run_id "$run_id" --arg date "$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
  --arg version "$version" --arg engine "$engine_version" --argjson ranks "$NRANKS" --arg sweep "${sweep[*]}" \
  --argjson rounds "$rounds" --arg joined "$swarm_joined" \
  --arg br_net "${net_name[bridge]}" --arg br_subnet "${subnet[bridge]}" --arg br_mtu "${mtu[bridge]}" \
  --arg ov_net "${net_name[overlay]}" --arg ov_subnet "${subnet[overlay]}" --arg ov_mtu "${mtu[overlay]}" \
  --argjson vni "$vni" --argjson boot "$boot_json" --argjson vxlan "$vxlan_json" \
  --argjson base_s "$t_base_s" --argjson build_s "$t_build_s" --argjson rounds_s "$((t4 - t3))" '
  def r4: . * 10000 | round / 10000;
  ($ratios | split("\n") | map(select(length > 0) | split("\t")
    | {collective: .[0], size: (.[1] | tonumber), overlay_busbw: (.[2] | tonumber),
       bridge_busbw: (.[3] | tonumber), ratio: (.[4] | tonumber)})) as $points
  | ($points | map(select(.size >= 1048576))) as $big
  | {run_id: $run_id, date: $date, collbench: $version, docker_engine: $engine, ranks: $ranks, sweep: $sweep,
     rounds: $rounds, swarm: {joined_here: ($joined != ""), advertise_addr: "127.0.0.1"},
     bridge: ({network: $br_net, subnet: $br_subnet, eth0_mtu: ($br_mtu | tonumber? // $br_mtu)} + $boot.bridge),
     overlay: ({network: $ov_net, subnet: $ov_subnet, eth0_mtu: ($ov_mtu | tonumber? // $ov_mtu), vxlan_id: $vni,
       vxlan_device_bytes_by_round: $vxlan} + $boot.overlay),
     wall_s: {base: $base_s, image_build: $build_s, rounds: $rounds_s},
     points: $points,
     avg_ratio_ge_1MiB: (($big | group_by(.collective) | map({key: .[0].collective, value: (map(.ratio) | add / length | r4)})
       | from_entries) + (if ($big | length) > 0 then {all: ($big | map(.ratio) | add / length | r4)} else {} end))}' \
  >"$work/results.json"
mv "$work/results.json" "$out/results.json"

# The same figures for people: stdout and results.md.
{
  printf '%-14s %10s %14s %13s %15s\n' collective "size (B)" "overlay busbw" "bridge busbw" "overlay/bridge"
  awk -F'\t' '{ printf "%-14s %10d %14.3f %13.3f %15.3f\n", $1, $2, $3, $4, $5 }' "$work/ratios.tsv"
  jq -r '.avg_ratio_ge_1MiB | to_entries[] | "\(.key) \(.value)"' "$out/results.json" |
    awk '{ printf "%-14s %10s %14s %13s %15.3f\n", $1, "avg>=1MiB", "", "", $2 }'
  printf '\nbest of %d rounds each; bridge eth0 MTU %s, overlay eth0 MTU %s (VXLAN id %s); VXLAN device bytes tx/rx by round: %s\n' \
    "$rounds" "${mtu[bridge]}" "${mtu[overlay]}" "$vni" "$(jq -r '[.[] | "\(.tx_bytes)/\(.rx_bytes)"] | join(", ")' <<<"$vxlan_json")"
}
{
  echo "| collective | size (B) | overlay busbw (GB/s) | bridge busbw (GB/s) | overlay / bridge |"
  echo "|---|---:|---:|---:|---:|"
  awk -F'\t' '{ printf "| %s | %d | %.3f | %.3f | %.3f |\n", $1, $2, $3, $4, $5 }' "$work/ratios.tsv"
  jq -r '.avg_ratio_ge_1MiB | to_entries[] | "| \(.key) | average over sizes >= 1 MiB | | | **\(.value * 1000 | round / 1000)** |"' "$out/results.json"
  echo
  jq -r '"Run \(.run_id) (\(.collbench), Docker engine \(.docker_engine)), \(.ranks) ranks, `\(.sweep)`, best of \(.rounds) rounds per network. " +
    "Bridge: \(.bridge.network) \(.bridge.subnet), eth0 MTU \(.bridge.eth0_mtu). " +
    "Overlay: \(.overlay.network) \(.overlay.subnet), eth0 MTU \(.overlay.eth0_mtu), VXLAN id \(.overlay.vxlan_id), " +
    "VXLAN device bytes tx/rx by round: \([.overlay.vxlan_device_bytes_by_round[] | "\(.tx_bytes)/\(.rx_bytes)"] | join(", ")). " +
    "Bootstrap s by round: bridge \(.bridge.bootstrap_s | map(. * 1000 | round / 1000) | join(", ")), overlay \(.overlay.bootstrap_s | map(. * 1000 | round / 1000) | join(", "))."' "$out/results.json"
} >"$out/results.md"
log "ok in $((SECONDS - t_start)) s; figures in $out/results.json and $out/results.md, each round's JSON beside them"
