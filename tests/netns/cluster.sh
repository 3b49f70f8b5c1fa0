#!/usr/bin/env bash
# A small cluster on one machine: hosts are network namespaces on a software switch, with a VXLAN
# overlay on top (the shape of Flannel's VXLAN backend). collbench's multi-host tests run on it.
#
#   cluster.sh check                         can this machine build clusters? (root, tools, kernel)
#   cluster.sh up NAME HOSTS [--rate RATE [--burst SIZE]] [--cc ALGO] [--id N] [--owner PID]
#                                            build cluster NAME with HOSTS hosts NAME-h0..NAME-h{HOSTS-1};
#                                            --rate shapes every host's eth0 egress (tc tbf, e.g. 1gbit);
#                                            --burst is its bucket (default 256kb; a smaller one makes
#                                            messages below 256 KB leave at the rate too, not at veth speed);
#                                            --cc sets every host's default TCP congestion control (its
#                                            net.ipv4.tcp_congestion_control; new namespaces inherit the machine's);
#                                            --owner: the process the cluster belongs to (see gc)
#   cluster.sh down NAME                     remove everything of NAME (idempotent; kills what runs in it)
#   cluster.sh gc                            down every cluster whose --owner process is gone (a test
#                                            killed with SIGKILL never ran its teardown)
#   cluster.sh exec NAME HOST CMD...         run CMD in HOST (0, h0 or NAME-h0), with HOST as hostname
#   cluster.sh hosts NAME                    host names, one a line
#   cluster.sh addr NAME HOST [IFACE]        IPv4 address of IFACE (eth0) in HOST
#   cluster.sh cidr NAME [eth0|vxlan0]       the underlay (default) or overlay subnet
#   cluster.sh hostfile NAME                 path of an mpirun hostfile (one slot per host)
#   cluster.sh rsh-agent NAME                path of a script for mpirun's --mca plm_rsh_agent
#   cluster.sh bytes NAME HOST IFACE         "RX_BYTES TX_BYTES" of IFACE in HOST
#   cluster.sh counters NAME [IFACE...]      "HOST IFACE RX_BYTES TX_BYTES" for every host (eth0 vxlan0)
#   cluster.sh shape NAME HOST RATE          shape HOST's eth0 egress to RATE (tc tbf), replacing its shaping
#   cluster.sh shape-pair NAME HOST PEER RATE
#                                            shape only what HOST sends to PEER's eth0 address to RATE (tc htb
#                                            and a filter on that address); the rest keeps the cluster's --rate
#   cluster.sh loss NAME HOST PROB           HOST drops each packet it receives or sends with probability
#                                            PROB (iptables statistic; segmentation offload off on every
#                                            host's eth0, so a drop is one wire packet, not a 64 KB segment)
#   cluster.sh fabric-loss NAME PROB         every host drops each packet it receives on eth0 with probability PROB
#                                            (iptables statistic; offloads off on every eth0 as for loss): a
#                                            fabric losing packets everywhere alike
#   cluster.sh tcp-buffers NAME HOST BYTES   HOST's net.ipv4.tcp_rmem and tcp_wmem all set to BYTES (its own
#                                            namespace's sysctls): a host whose TCP buffers are misconfigured
#   cluster.sh police NAME HOST RATE         HOST drops what it receives on eth0 beyond RATE bytes per second
#                                            (e.g. 4mb/s: iptables hashlimit, an ingress policer)
#   cluster.sh flap NAME HOST DOWN_S EVERY_S HOST's link goes down for DOWN_S seconds every EVERY_S seconds
#                                            (its switch port, so HOST's eth0 loses its carrier), first after
#                                            EVERY_S, until the cluster is taken down
#   cluster.sh cut NAME HOST PEER             every packet between HOST and PEER is dropped, both ways (iptables),
#                                            carriers up: one broken link, the rest of the cluster whole
#   cluster.sh mtu-blackhole NAME HOST PEER MTU
#                                            between HOST and PEER only, packets longer than MTU bytes are dropped
#                                            both ways, with no ICMP (iptables length): a path MTU black hole on
#                                            one link; small packets (connection set-up) pass
#   cluster.sh port-mtu NAME HOST MTU        HOST's switch port (its veth in the switch) at MTU bytes under
#                                            HOST's own 1500, offloads off on every host's eth0: frames larger
#                                            than MTU to or from HOST vanish, no ICMP (a path MTU black hole at
#                                            one host); small packets (connection set-up) pass
#   cluster.sh blink NAME HOST RATE ON_S EVERY_S
#                                            HOST's switch port sends to it at RATE for ON_S seconds every
#                                            EVERY_S seconds (tc tbf in the switch): a port that is slow now and
#                                            then with its carrier up, until the cluster is taken down
#
# Layout of cluster NAME with id N (10.213.N.0/24 underlay, 10.214.N.0/24 overlay):
#   namespace NAME-sw : bridge brN, one veth vNhI per host (the switch; no addresses)
#   namespace NAME-hI : lo; eth0 (veth peer of vNhI, MTU 1500, 10.213.N.(10+I)/24);
#                       vxlan0 (VNI 42, UDP 4789 over eth0, MTU 1450, 10.214.N.(10+I)/24)
#   every veth end receives with packet steering over all CPUs (a flow stays in order, as on a NIC)
# Nothing is created in the root namespace, so traffic can only reach these hosts, and interface names
# cannot collide with the machine's or another cluster's. State lives in $CLUSTER_STATE (default
# /run/collbench-netns): one folder per cluster, and an id claim per cluster so concurrent clusters
# get distinct subnets (not needed for isolation, but it keeps addresses unambiguous in logs).
set -euo pipefail
shopt -s inherit_errexit # set -e inside $(...) too, so a die in a helper stops the caller

STATE=${CLUSTER_STATE:-/run/collbench-netns}
SELF=$(readlink -f "$0")
VNI=42
VXLAN_PORT=4789

die() { echo "cluster.sh: $*" >&2; exit 1; }
# int_in LO HI V: V is a whole number in LO..HI.
int_in() { [[ $3 =~ ^[0-9]+$ ]] && ((10#$3 >= $1 && 10#$3 <= $2)); }

valid_name() {
  # Hyphens are reserved: NAME-h3 must split back into NAME and h3 unambiguously.
  [[ $1 =~ ^[A-Za-z0-9_]{1,24}$ ]] || die "cluster name '$1' must be 1-24 of [A-Za-z0-9_]"
}

# ---- state of one cluster -------------------------------------------------------------------------

state_of() { echo "$STATE/$1"; }
id_of() { cat "$(state_of "$1")/id" 2>/dev/null || die "no cluster '$1' (no $(state_of "$1")/id); run: $0 up $1 HOSTS"; }
nhosts_of() {
  [[ -f $(state_of "$1")/hosts ]] || die "no cluster '$1'; run: $0 up $1 HOSTS"
  cat "$(state_of "$1")/hosts"
}
underlay_ip() { echo "10.213.$1.$((10 + $2))"; }   # id, host index
overlay_ip() { echo "10.214.$1.$((10 + $2))"; }
# Fixed MACs on vxlan0, so the static FDB and neighbour entries can be written before any packet flows.
overlay_mac() { printf '02:cb:00:%02x:00:%02x' "$1" "$2"; }

# Host argument -> index: "2", "h2" and "NAME-h2" all mean host 2 of NAME.
host_index() {
  local name=$1 host=$2 i
  case $host in
    "$name"-h*) i=${host#"$name"-h} ;;
    h*) i=${host#h} ;;
    *) i=$host ;;
  esac
  local n
  n=$(nhosts_of "$name")
  int_in 0 $((n - 1)) "$i" || die "cluster '$name' has no host '$host'"
  echo $((10#$i))
}

# Claims the lowest free id in 1..254 (mkdir is atomic, so two clusters coming up at once cannot both win).
claim_id() {
  local name=$1 want=${2:-} id
  mkdir -p "$STATE/.ids"
  for id in ${want:-$(seq 1 254)}; do
    if mkdir "$STATE/.ids/$id" 2>/dev/null; then
      echo "$name" >"$STATE/.ids/$id/name"
      echo "$id"
      return
    fi
  done
  die "no free cluster id${want:+ ($want is taken by $(cat "$STATE/.ids/$want/name" 2>/dev/null))}"
}

# ---- check ----------------------------------------------------------------------------------------

cmd_check() {
  (($(id -u) == 0)) || die "needs root (network namespaces); running as uid $(id -u)"
  local t
  for t in ip bridge tc unshare; do
    command -v "$t" >/dev/null || die "'$t' is not installed (Debian: iproute2, util-linux)"
  done
  # Build a throwaway cluster (as a separate process, so set -e holds in it): proves namespaces, veth,
  # bridge, VXLAN and tbf in this kernel.
  local probe="cbprobe$$" out rc=0
  out=$(bash "$SELF" up "$probe" 2 --rate 1gbit 2>&1) || rc=$?
  bash "$SELF" down "$probe" >/dev/null 2>&1 || true
  ((rc == 0)) || die "cannot build a probe cluster: $out"
  echo "ok: namespaces, veth, bridge, vxlan and tbf work here"
}

# ---- up -------------------------------------------------------------------------------------------

cmd_up() {
  local name=${1:-} n=${2:-} rate="" burst=256kb cc="" want_id="" owner=""
  [[ -n $name && -n $n ]] || die "usage: $0 up NAME HOSTS [--rate RATE [--burst SIZE]] [--cc ALGO] [--id N] [--owner PID]"
  valid_name "$name"
  int_in 1 200 "$n" || die "HOSTS must be 1..200, not '$n'"
  n=$((10#$n))
  shift 2
  while (($#)); do
    case $1 in
      --rate) rate=${2:?--rate needs a value such as 1gbit}; shift 2 ;;
      --burst) burst=${2:?--burst needs a size such as 16kb}; [[ $burst =~ ^[0-9]+[km]?b?$ ]] ||
        die "--burst '$burst' is not a tc size such as 16kb"; shift 2 ;;
      --cc) cc=${2:?--cc needs a congestion control such as reno}; [[ $cc =~ ^[a-z0-9_]{1,15}$ ]] ||
        die "--cc '$cc' is not a congestion control name such as reno"; shift 2 ;;
      --id) want_id=${2:?--id needs 1..254}; int_in 1 254 "$want_id" || die "--id must be 1..254"
        want_id=$((10#$want_id)); shift 2 ;;
      --owner) owner=${2:?--owner needs a pid}; [[ $owner =~ ^[0-9]+$ ]] || die "--owner must be a pid"; shift 2 ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ -n $rate || $burst == 256kb ]] || die "--burst is the bucket of --rate's shaper; give --rate too"
  local st id
  st=$(state_of "$name")
  mkdir -p "$STATE"
  # mkdir is atomic: of two "up NAME" at once, one fails here before touching anything.
  mkdir "$st" 2>/dev/null || die "cluster '$name' exists; run: $0 down $name"
  # From here on, any failure (set -e, die) or Ctrl-C removes what was built so far.
  # (Expanded now: $name is local and gone by the time an exit runs the trap; it is [A-Za-z0-9_] only.)
  # shellcheck disable=SC2064
  trap "cmd_down $name >/dev/null 2>&1" EXIT
  trap 'exit 130' INT TERM
  id=$(claim_id "$name" "$want_id")
  echo "$id" >"$st/id"
  echo "$n" >"$st/hosts"
  [[ -z $owner ]] || echo "$owner" >"$st/owner"

  local sw="$name-sw" br="br$id" i ns
  ip netns add "$sw"
  # IPv6 off everywhere: no router solicitations or MLD reports adding bytes to the counters.
  no_ipv6 "$sw"
  ip -n "$sw" link add "$br" type bridge forward_delay 0 stp_state 0
  ip -n "$sw" link set "$br" up

  for ((i = 0; i < n; i++)); do
    ns="$name-h$i"
    ip netns add "$ns"
    no_ipv6 "$ns"
    ip -n "$ns" link set lo up
    # The veth pair is born with one end in the switch and the other in the host: it never exists in
    # the root namespace, so 'eth0' can be its name in every host.
    ip -n "$sw" link add "v${id}h$i" mtu 1500 type veth peer name eth0 netns "$ns"
    ip -n "$sw" link set "v${id}h$i" master "$br" up
    ip -n "$ns" link set eth0 mtu 1500 up
    flow_steering "$sw" "v${id}h$i"
    flow_steering "$ns" eth0
    ip -n "$ns" addr add "$(underlay_ip "$id" "$i")/24" dev eth0
    # The overlay: VXLAN over eth0 without learning (entries below are static, as Flannel writes them).
    ip -n "$ns" link add vxlan0 address "$(overlay_mac "$id" "$i")" mtu 1450 type vxlan id $VNI \
      dstport $VXLAN_PORT dev eth0 local "$(underlay_ip "$id" "$i")" nolearning
    ip -n "$ns" addr add "$(overlay_ip "$id" "$i")/24" dev vxlan0
    ip -n "$ns" link set vxlan0 up
    if [[ -n $rate ]]; then
      # Egress shaping of the host's link (the overlay rides on it, so it is shaped too).
      tc -n "$ns" qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
      echo "$rate" >"$st/rate"
      echo "$burst" >"$st/burst"
    fi
    if [[ -n $cc ]]; then
      ip netns exec "$ns" sysctl -q -w net.ipv4.tcp_congestion_control="$cc" ||
        die "host $ns cannot take congestion control '$cc' (in a namespace only those in net.ipv4.tcp_allowed_congestion_control: $(ip netns exec "$ns" cat /proc/sys/net/ipv4/tcp_allowed_congestion_control))"
    fi
  done

  # Flannel-style static overlay: per peer, where its VXLAN MAC lives (FDB) and which MAC its overlay
  # address has (permanent neighbour), so no flooding or ARP is needed on vxlan0.
  local j
  for ((i = 0; i < n; i++)); do
    for ((j = 0; j < n; j++)); do
      ((i != j)) || continue
      bridge -n "$name-h$i" fdb append "$(overlay_mac "$id" "$j")" dev vxlan0 dst "$(underlay_ip "$id" "$j")" \
        self permanent
      ip -n "$name-h$i" neigh replace "$(overlay_ip "$id" "$j")" lladdr "$(overlay_mac "$id" "$j")" \
        dev vxlan0 nud permanent
    done
  done

  for ((i = 0; i < n; i++)); do echo "$name-h$i slots=1"; done >"$st/hostfile"
  # mpirun calls the agent as "AGENT HOST COMMAND..."; this one only knows this cluster's hosts.
  cat >"$st/rsh-agent" <<EOF
#!/bin/sh
# mpirun's rsh agent for cluster $name (generated by $SELF): "ssh" into a namespace host.
exec bash "$SELF" agent "$name" "\$@"
EOF
  chmod +x "$st/rsh-agent"

  wait_links "$name" "$n"
  trap - EXIT INT TERM
  echo "cluster $name: $n hosts, id $id, underlay 10.213.$id.0/24 (eth0), overlay 10.214.$id.0/24 (vxlan0)${rate:+, egress $rate}${cc:+, congestion control $cc}"
}

# Receive packet steering on device $2 of namespace $1: each flow is received on the CPU its hash picks, as
# a NIC's receive hashing keeps it on one queue. Without it a veth hands each packet to the backlog of the CPU
# that sent it, so a flow whose sender moves between CPUs arrives out of order, and TCP takes the reordering
# for loss (spurious retransmissions, a window kept small): on 2 busy cores, a clean link then reads as slow
# (results/scale/README.md). Not fatal: a kernel without RPS still runs the cluster, only less faithfully.
flow_steering() {
  local n mask=""
  n=$(nproc --all)
  # rps_cpus is a hex mask of every CPU, in comma-separated 32-bit groups, highest first.
  while ((n >= 32)); do
    mask=",ffffffff$mask"
    n=$((n - 32))
  done
  if ((n > 0)); then mask=$(printf '%x' $(((1 << n) - 1)))$mask; else mask=${mask#,}; fi
  ip netns exec "$1" sh -c "echo $mask >/sys/class/net/$2/queues/rx-0/rps_cpus" 2>/dev/null ||
    echo "cluster.sh: warning: no receive packet steering on $1 $2 (flows may arrive out of order)" >&2
}

# IPv6 off in namespace $1 (interfaces created later inherit "default"); /proc/sys/net is per namespace.
# Not fatal: a kernel without IPv6 has nothing to turn off.
no_ipv6() {
  # shellcheck disable=SC2016 # $f belongs to the inner shell
  ip netns exec "$1" sh -c 'for f in all default; do echo 1 >/proc/sys/net/ipv6/conf/$f/disable_ipv6; done' \
    2>/dev/null || true
}

# Bounded poll until every host's eth0 has carrier and every switch port forwards (no fixed sleep).
wait_links() {
  local name=$1 n=$2 try i ok
  for ((try = 0; try < 200; try++)); do
    ok=1
    for ((i = 0; i < n; i++)); do
      ip -n "$name-h$i" -o link show dev eth0 | grep -q 'state UP' || { ok=0; break; }
    done
    if ((ok)) && (($(bridge -n "$name-sw" link show | grep -c 'state forwarding') == n)); then
      return 0
    fi
    sleep 0.05
  done
  die "links of cluster '$name' did not come up within 10 s"
}

# ---- down -----------------------------------------------------------------------------------------

cmd_down() {
  local name=${1:-}
  [[ -n $name ]] || die "usage: $0 down NAME"
  valid_name "$name"
  local ns pid
  # Every namespace of this cluster, found by name even if the state folder is gone.
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep -E "^${name}-(sw|h[0-9]+)$" || true); do
    # Processes left inside (ranks, orted) would keep the namespace alive after its name is removed.
    for pid in $(ip netns pids "$ns" 2>/dev/null || true); do
      kill -KILL "$pid" 2>/dev/null || true
    done
    ip netns del "$ns" 2>/dev/null || true
  done
  local st id
  st=$(state_of "$name")
  if [[ -f $st/id ]]; then
    id=$(cat "$st/id")
    # Release the id only if it is still ours.
    if [[ $(cat "$STATE/.ids/$id/name" 2>/dev/null) == "$name" ]]; then rm -rf "${STATE:?}/.ids/$id"; fi
  fi
  rm -rf "$st"
}

cmd_gc() {
  local st name owner
  for st in "$STATE"/*/; do
    [[ -f $st/owner ]] || continue
    name=$(basename "$st")
    owner=$(cat "$st/owner")
    if ! kill -0 "$owner" 2>/dev/null; then
      echo "cluster.sh: removing cluster $name (owner $owner is gone)" >&2
      cmd_down "$name"
    fi
  done
}

# ---- running things in hosts ----------------------------------------------------------------------

# Runs "$@" in host namespace $2 of cluster $1 in its own UTS namespace named after the host, so
# hostname() differs per host (as on real machines; OpenMPI also keys its session folder on it).
in_host() {
  local name=$1 i=$2
  shift 2
  # shellcheck disable=SC2016 # $0 and $@ belong to the inner shell
  exec ip netns exec "$name-h$i" unshare --uts -- \
    sh -c 'echo "$0" >/proc/sys/kernel/hostname && exec "$@"' "$name-h$i" "$@"
}

cmd_exec() {
  local name=${1:-} host=${2:-}
  [[ -n $name && -n $host && $# -ge 3 ]] || die "usage: $0 exec NAME HOST CMD..."
  valid_name "$name"
  shift 2
  local i
  i=$(host_index "$name" "$host")
  in_host "$name" "$i" "$@"
}

# mpirun's plm_rsh_agent protocol: [ssh-style options] HOST COMMAND-WORDS...; like ssh, the words are
# joined and run by a shell on the "remote" host (ORTE quotes its arguments for that shell).
cmd_agent() {
  local name=${1:-}
  shift || true
  valid_name "$name"
  while [[ ${1:-} == -* ]]; do shift; done
  local host=${1:?agent: no host given} i
  shift
  i=$(host_index "$name" "$host")
  in_host "$name" "$i" sh -c "$*"
}

# ---- facts about a cluster ------------------------------------------------------------------------

cmd_hosts() {
  local i n
  n=$(nhosts_of "$1")
  for ((i = 0; i < n; i++)); do echo "$1-h$i"; done
}

cmd_addr() {
  local name=$1 host=$2 iface=${3:-eth0} id i
  id=$(id_of "$name")
  i=$(host_index "$name" "$host")
  case $iface in
    eth0) underlay_ip "$id" "$i" ;;
    vxlan0) overlay_ip "$id" "$i" ;;
    *) ip -n "$name-h$i" -4 -o addr show dev "$iface" | awk '{split($4, a, "/"); print a[1]; exit}' ;;
  esac
}

cmd_cidr() {
  local id
  id=$(id_of "$1")
  case ${2:-eth0} in
    eth0 | underlay) echo "10.213.$id.0/24" ;;
    vxlan0 | overlay) echo "10.214.$id.0/24" ;;
    *) die "cidr: '$2' is neither eth0 nor vxlan0" ;;
  esac
}

# Counters from the host's own /sys (ip netns exec mounts the namespace's sysfs).
cmd_bytes() {
  local name=$1 host=$2 iface=${3:-eth0} i
  i=$(host_index "$name" "$host")
  # shellcheck disable=SC2016 # $1 and $d belong to the inner shell
  ip netns exec "$name-h$i" sh -c \
    'd=/sys/class/net/$1/statistics; [ -d "$d" ] || { echo "no interface $1" >&2; exit 1; }
     echo "$(cat "$d/rx_bytes") $(cat "$d/tx_bytes")"' sh "$iface"
}

cmd_counters() {
  local name=$1 i n f
  shift
  local ifaces=("$@")
  ((${#ifaces[@]})) || ifaces=(eth0 vxlan0)
  n=$(nhosts_of "$name")
  for ((i = 0; i < n; i++)); do
    for f in "${ifaces[@]}"; do echo "$name-h$i $f $(cmd_bytes "$name" "$i" "$f")"; done
  done
}

# ---- faults ---------------------------------------------------------------------------------------

# The cluster's --rate, or a rate far above what a veth carries here (so "unshaped" stays unshaped).
rate_of() {
  cat "$(state_of "$1")/rate" 2>/dev/null || echo 100gbit
}

# The cluster's --burst, the bucket every reshaping of its hosts keeps.
burst_of() {
  cat "$(state_of "$1")/burst" 2>/dev/null || echo 256kb
}

valid_rate() {
  [[ $1 =~ ^[0-9]+(\.[0-9]+)?([kmgt]?bit|[kmgt]?bps)$ ]] || die "rate '$1' is not a tc rate such as 100mbit"
}

cmd_shape() {
  local name=$1 host=${2:?HOST} rate=${3:?RATE such as 100mbit} i
  valid_rate "$rate"
  i=$(host_index "$name" "$host")
  tc -n "$name-h$i" qdisc replace dev eth0 root tbf rate "$rate" burst "$(burst_of "$name")" latency 50ms
}

cmd_shape_pair() {
  local name=$1 host=${2:?HOST} peer=${3:?PEER} rate=${4:?RATE such as 100mbit} i p id ns base burst
  valid_rate "$rate"
  i=$(host_index "$name" "$host")
  p=$(host_index "$name" "$peer")
  ((i != p)) || die "shape-pair: HOST and PEER are the same host"
  id=$(id_of "$name")
  ns="$name-h$i"
  base=$(rate_of "$name")
  burst=$(burst_of "$name")
  # HTB: class 1:20 (the default) keeps the host's own rate, class 1:10 carries only traffic to PEER.
  tc -n "$ns" qdisc replace dev eth0 root handle 1: htb default 20
  tc -n "$ns" class replace dev eth0 parent 1: classid 1:10 htb rate "$rate" ceil "$rate" burst "$burst" quantum 1514
  tc -n "$ns" class replace dev eth0 parent 1: classid 1:20 htb rate "$base" ceil "$base" burst "$burst" quantum 1514
  tc -n "$ns" filter replace dev eth0 parent 1: protocol ip prio 1 u32 \
    match ip dst "$(underlay_ip "$id" "$p")/32" flowid 1:10
}

cmd_loss() {
  local name=$1 host=${2:?HOST} prob=${3:?PROB such as 0.01} i ns
  [[ $prob =~ ^0?\.[0-9]+$ ]] || die "loss: PROB must be a probability below 1 such as 0.01, not '$prob'"
  command -v iptables >/dev/null || die "'iptables' is not installed (Debian: iptables)"
  command -v ethtool >/dev/null || die "'ethtool' is not installed (Debian: ethtool)"
  i=$(host_index "$name" "$host")
  ns="$name-h$i"
  # Offloads off on every host: a sender's 64 KB segment would otherwise cross the veth whole and be
  # dropped as one.
  local j n
  n=$(nhosts_of "$name")
  for ((j = 0; j < n; j++)); do
    ip netns exec "$name-h$j" ethtool -K eth0 tso off gso off gro off >/dev/null
  done
  ip netns exec "$ns" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$prob" -j DROP
  ip netns exec "$ns" iptables -A OUTPUT -o eth0 -m statistic --mode random --probability "$prob" -j DROP
}

cmd_fabric_loss() {
  local name=$1 prob=${2:?PROB such as 0.01} j n
  [[ $prob =~ ^0?\.[0-9]+$ ]] || die "fabric-loss: PROB must be a probability below 1 such as 0.01, not '$prob'"
  command -v iptables >/dev/null || die "'iptables' is not installed (Debian: iptables)"
  command -v ethtool >/dev/null || die "'ethtool' is not installed (Debian: ethtool)"
  n=$(nhosts_of "$name")
  for ((j = 0; j < n; j++)); do
    ip netns exec "$name-h$j" ethtool -K eth0 tso off gso off gro off >/dev/null
    ip netns exec "$name-h$j" iptables -A INPUT -i eth0 -m statistic --mode random --probability "$prob" -j DROP
  done
}

cmd_tcp_buffers() {
  local name=$1 host=${2:?HOST} bytes=${3:?BYTES such as 4096} i
  int_in 4096 2147483647 "$bytes" || die "tcp-buffers: BYTES must be a whole number from 4096, not '$bytes'"
  i=$(host_index "$name" "$host")
  ip netns exec "$name-h$i" sh -c "echo '$bytes $bytes $bytes' >/proc/sys/net/ipv4/tcp_rmem && \
    echo '$bytes $bytes $bytes' >/proc/sys/net/ipv4/tcp_wmem"
}

cmd_police() {
  local name=$1 host=${2:?HOST} rate=${3:?RATE such as 4mb/s} i
  [[ $rate =~ ^[0-9]+[km]?b/s$ ]] || die "police: RATE is bytes per second such as 4mb/s or 500kb/s, not '$rate'"
  command -v iptables >/dev/null || die "'iptables' is not installed (Debian: iptables)"
  i=$(host_index "$name" "$host")
  # One bucket for everything arriving on eth0; the burst is the smallest iptables takes for the rate.
  ip netns exec "$name-h$i" iptables -A INPUT -i eth0 -m hashlimit --hashlimit-name cbpolice \
    --hashlimit-above "$rate" --hashlimit-burst 8mb -j DROP
}

cmd_flap() {
  local name=$1 host=${2:?HOST} down=${3:?DOWN_S} every=${4:?EVERY_S} i id
  [[ $down =~ ^[0-9]+(\.[0-9]+)?$ && $every =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    die "flap: DOWN_S and EVERY_S are seconds such as 1 or 0.5, not '$down' '$every'"
  i=$(host_index "$name" "$host")
  id=$(id_of "$name")
  # The loop lives in the switch namespace, so taking the cluster down kills it with the rest; detached, so
  # this command returns at once.
  setsid ip netns exec "$name-sw" sh -c "while :; do sleep $every; ip link set v${id}h$i down; sleep $down; \
    ip link set v${id}h$i up; done" </dev/null >/dev/null 2>&1 &
}

cmd_cut() {
  local name=$1 host=${2:?HOST} peer=${3:?PEER} i p id
  command -v iptables >/dev/null || die "'iptables' is not installed (Debian: iptables)"
  i=$(host_index "$name" "$host")
  p=$(host_index "$name" "$peer")
  ((i != p)) || die "cut: HOST and PEER are the same host"
  id=$(id_of "$name")
  ip netns exec "$name-h$i" iptables -A OUTPUT -o eth0 -d "$(underlay_ip "$id" "$p")" -j DROP
  ip netns exec "$name-h$p" iptables -A OUTPUT -o eth0 -d "$(underlay_ip "$id" "$i")" -j DROP
}

cmd_mtu_blackhole() {
  local name=$1 host=${2:?HOST} peer=${3:?PEER} mtu=${4:?MTU such as 1280} i p id
  int_in 68 65534 "$mtu" || die "mtu-blackhole: MTU must be between 68 and 65534, not '$mtu'"
  command -v iptables >/dev/null || die "'iptables' is not installed (Debian: iptables)"
  i=$(host_index "$name" "$host")
  p=$(host_index "$name" "$peer")
  ((i != p)) || die "mtu-blackhole: HOST and PEER are the same host"
  id=$(id_of "$name")
  # On the way out of each end: a segment offloaded whole is dropped whole, as a switch port with the smaller
  # MTU would drop each of its wire packets.
  ip netns exec "$name-h$i" iptables -A OUTPUT -o eth0 -d "$(underlay_ip "$id" "$p")" \
    -m length --length "$((mtu + 1)):65535" -j DROP
  ip netns exec "$name-h$p" iptables -A OUTPUT -o eth0 -d "$(underlay_ip "$id" "$i")" \
    -m length --length "$((mtu + 1)):65535" -j DROP
}

cmd_port_mtu() {
  local name=$1 host=${2:?HOST} mtu=${3:?MTU such as 1400} i id j n
  int_in 68 1500 "$mtu" || die "port-mtu: MTU must be between 68 and 1500, not '$mtu'"
  command -v ethtool >/dev/null || die "'ethtool' is not installed (Debian: ethtool)"
  i=$(host_index "$name" "$host")
  id=$(id_of "$name")
  # Offloads off on every host: a 64 KB segment would otherwise cross the veth whole and be cut to fit
  # rather than dropped, as a real switch port drops each oversized wire frame.
  n=$(nhosts_of "$name")
  for ((j = 0; j < n; j++)); do
    ip netns exec "$name-h$j" ethtool -K eth0 tso off gso off gro off >/dev/null
  done
  ip -n "$name-sw" link set "v${id}h$i" mtu "$mtu"
}

cmd_blink() {
  local name=$1 host=${2:?HOST} rate=${3:?RATE such as 10mbit} on=${4:?ON_S} every=${5:?EVERY_S} i id
  valid_rate "$rate"
  [[ $on =~ ^[0-9]+(\.[0-9]+)?$ && $every =~ ^[0-9]+(\.[0-9]+)?$ ]] ||
    die "blink: ON_S and EVERY_S are seconds such as 1 or 0.5, not '$on' '$every'"
  i=$(host_index "$name" "$host")
  id=$(id_of "$name")
  # As flap: the loop lives in the switch namespace and goes with the cluster. The port's carrier stays up.
  setsid ip netns exec "$name-sw" sh -c "while :; do sleep $every; \
    tc qdisc replace dev v${id}h$i root tbf rate $rate burst 32kb latency 400ms; sleep $on; \
    tc qdisc del dev v${id}h$i root; done" </dev/null >/dev/null 2>&1 &
}

main() {
  local cmd=${1:-}
  shift || true
  case $cmd in
    check) cmd_check ;;
    up) cmd_up "$@" ;;
    down) cmd_down "$@" ;;
    gc) cmd_gc ;;
    exec) cmd_exec "$@" ;;
    agent) cmd_agent "$@" ;;
    hosts) valid_name "${1:?NAME}"; id_of "$1" >/dev/null; cmd_hosts "$1" ;;
    addr) valid_name "${1:?NAME}"; cmd_addr "$1" "${2:?HOST}" "${3:-eth0}" ;;
    cidr) valid_name "${1:?NAME}"; cmd_cidr "$1" "${2:-eth0}" ;;
    hostfile) valid_name "${1:?NAME}"; id_of "$1" >/dev/null; echo "$(state_of "$1")/hostfile" ;;
    rsh-agent) valid_name "${1:?NAME}"; id_of "$1" >/dev/null; echo "$(state_of "$1")/rsh-agent" ;;
    bytes) valid_name "${1:?NAME}"; cmd_bytes "$1" "${2:?HOST}" "${3:-eth0}" ;;
    counters) valid_name "${1:?NAME}"; id_of "$1" >/dev/null; cmd_counters "$@" ;;
    shape) valid_name "${1:?NAME}"; cmd_shape "$@" ;;
    shape-pair) valid_name "${1:?NAME}"; cmd_shape_pair "$@" ;;
    loss) valid_name "${1:?NAME}"; cmd_loss "$@" ;;
    police) valid_name "${1:?NAME}"; cmd_police "$@" ;;
    fabric-loss) valid_name "${1:?NAME}"; cmd_fabric_loss "$@" ;;
    tcp-buffers) valid_name "${1:?NAME}"; cmd_tcp_buffers "$@" ;;
    flap) valid_name "${1:?NAME}"; cmd_flap "$@" ;;
    cut) valid_name "${1:?NAME}"; cmd_cut "$@" ;;
    mtu-blackhole) valid_name "${1:?NAME}"; cmd_mtu_blackhole "$@" ;;
    port-mtu) valid_name "${1:?NAME}"; cmd_port_mtu "$@" ;;
    blink) valid_name "${1:?NAME}"; cmd_blink "$@" ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2; exit 2 ;;
  esac
}

main "$@"
