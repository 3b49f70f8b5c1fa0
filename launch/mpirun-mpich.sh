#!/usr/bin/env bash
# collbench under MPICH's (Hydra) mpiexec: one rank per node by default, MPICH pinned to the same interface.
#
# Usage: launch/mpirun-mpich.sh -H node1,node2[,...] [-i IFACE] [-p RANKS_PER_NODE] [-- collbench run flags]
# Environment: COLLBENCH (binary), MPIEXEC (default: mpiexec), MPIEXEC_FLAGS (extra flags).
# Needs: collbench built with --features mpi against MPICH for the mpi path (else pass -- --transport tcp).
set -euo pipefail

hosts="" iface="" ppn=1
while [ $# -gt 0 ]; do
    case "$1" in
        -H) hosts=$2; shift 2 ;;
        -i) iface=$2; shift 2 ;;
        -p) ppn=$2; shift 2 ;;
        --) shift; break ;;
        -h|--help) sed -n '2,7p' "$0"; exit 0 ;;
        *) echo "mpirun-mpich.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[ -n "$hosts" ] || { echo "mpirun-mpich.sh: -H node1,node2,... is required" >&2; exit 2; }

n=$(( $(tr ',' '\n' <<<"$hosts" | grep -c .) * ppn ))
flags=(-hosts "$hosts" -ppn "$ppn" -n "$n")
coll=()
if [ -n "$iface" ]; then
    flags+=(-iface "$iface")
    coll+=(--iface "$iface")
fi
# shellcheck disable=SC2086  # MPIEXEC_FLAGS is a list of flags
exec "${MPIEXEC:-mpiexec}" "${flags[@]}" ${MPIEXEC_FLAGS:-} "${COLLBENCH:-collbench}" run --transport tcp,mpi "${coll[@]}" "$@"
