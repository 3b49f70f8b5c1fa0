#!/usr/bin/env bash
# collbench under OpenMPI's mpirun: one rank per node by default, OpenMPI's own TCP traffic pinned to the
# same interface collbench's TCP path uses, so `--transport tcp,mpi` compares like with like.
#
# Usage: launch/mpirun-openmpi.sh -H node1,node2[,...] [-i IFACE] [-p RANKS_PER_NODE] [-- collbench run flags]
#   e.g. launch/mpirun-openmpi.sh -H n1,n2,n3,n4 -i eth0 -- -e 1G --collective all_reduce,all_gather
# Environment: COLLBENCH (binary, default: collbench on PATH), MPIRUN (default: mpirun),
#              MPIRUN_FLAGS (extra mpirun flags, e.g. "--mca btl_tcp_links 4").
# Needs: collbench built with --features mpi for the mpi path (else pass -- --transport tcp).
set -euo pipefail

hosts="" iface="" ppn=1
while [ $# -gt 0 ]; do
    case "$1" in
        -H) hosts=$2; shift 2 ;;
        -i) iface=$2; shift 2 ;;
        -p) ppn=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,10p' "$0"; exit 0 ;;
        *) echo "mpirun-openmpi.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$hosts" ] || { echo "mpirun-openmpi.sh: -H node1,node2,... is required" >&2; exit 2; }

n=$(( $(tr ',' '\n' <<<"$hosts" | grep -c .) * ppn ))
hostspec=$(tr ',' '\n' <<<"$hosts" | sed "s/\$/:$ppn/" | paste -sd, -)
flags=(--host "$hostspec" -np "$n" --map-by "ppr:$ppn:node" --mca pml ob1 --mca btl "tcp,self")
coll=()
if [ -n "$iface" ]; then
    flags+=(--mca btl_tcp_if_include "$iface" --mca oob_tcp_if_include "$iface")
    coll+=(--iface "$iface")
fi
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)
# shellcheck disable=SC2086  # MPIRUN_FLAGS is a list of flags
exec "${MPIRUN:-mpirun}" "${flags[@]}" ${MPIRUN_FLAGS:-} "${COLLBENCH:-collbench}" run --transport tcp,mpi "${coll[@]}" "$@"
