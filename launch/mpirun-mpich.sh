#!/usr/bin/env bash
# collbench under MPICH's (Hydra) mpiexec: one rank per node by default, MPICH pinned to the same interface.
#
# Usage: launch/mpirun-mpich.sh (-H node1,node2[,...] | -f HOSTFILE) [-i IFACE] [-p RANKS_PER_NODE]
#                               [-r HOST:PORT] [-n] [-- collbench run flags]
#   -f: a Hydra hostfile ("node:N" lines); -p then places RANKS_PER_NODE on every node.
#   -r: the rendezvous address (COLLBENCH_ROOT, an address of the first node); needed when collbench was
#       built without MPI (then also pass -- --transport tcp). A COLLBENCH_ROOT already set is passed on.
#   -n: print the mpiexec command and exit.
# Flags after -- win: -- --iface X or -- --transport tcp replace the script's own (-i, tcp,mpi).
# MPI settings: -bind-to none unless MPIEXEC_FLAGS binds (ranks that outnumber the cores must not share
# one); stated on stderr. Under Hydra a rank killed by a signal ends the job at once: the culprit line of
# the other ranks may not appear (OpenMPI's script keeps it; see launch/README.md).
# Environment: COLLBENCH (binary), MPIEXEC (default: mpiexec), MPIEXEC_FLAGS (extra flags).
# Needs: collbench built with --features mpi against MPICH for the mpi path (else pass -- --transport tcp).
set -euo pipefail

me=mpirun-mpich.sh
hosts="" hostfile="" iface="" ppn=1 root=${COLLBENCH_ROOT:-} dry=0
while [ $# -gt 0 ]; do
    case "$1" in
        -H) hosts=${2:?-H needs node1,node2,...}; shift 2 ;;
        -f) hostfile=${2:?-f needs a hostfile}; shift 2 ;;
        -i) iface=${2:?-i needs an interface}; shift 2 ;;
        -p) ppn=${2:?-p needs a number}; shift 2 ;;
        -r) root=${2:?-r needs HOST:PORT}; shift 2 ;;
        -n) dry=1; shift ;;
        --) shift; break ;;
        -h|--help) sed -n '2,15p' "$0"; exit 0 ;;
        *) echo "$me: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
done
[[ $ppn =~ ^[1-9][0-9]*$ ]] || { echo "$me: -p wants a whole number of ranks per node, not '$ppn'" >&2; exit 2; }
if [ -n "$hosts" ] && [ -n "$hostfile" ]; then
    echo "$me: give the nodes once: -H node1,node2,... or -f HOSTFILE" >&2; exit 2
fi
flags=()
if [ -n "$hostfile" ]; then
    [ -r "$hostfile" ] || { echo "$me: cannot read the hostfile '$hostfile'" >&2; exit 2; }
    nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$hostfile" || true)
    flags+=(-f "$hostfile")
elif [ -n "$hosts" ]; then
    nodes=$(tr ',' '\n' <<<"$hosts" | grep -c . || true)
    flags+=(-hosts "$hosts")
else
    echo "$me: the nodes are required: -H node1,node2,... or -f HOSTFILE" >&2; exit 2
fi
[ "$nodes" -gt 0 ] || { echo "$me: no nodes in ${hostfile:-$hosts}" >&2; exit 2; }
n=$((nodes * ppn))
flags+=(-ppn "$ppn" -n "$n")

user_sets() {
    local flag=$1 a
    for a in "${run_args[@]}"; do
        case "$a" in "$flag" | "$flag"=*) return 0 ;; esac
    done
    return 1
}
run_args=("$@")
coll=()
user_sets --transport || coll+=(--transport "tcp,mpi")
if [ -n "$iface" ]; then
    flags+=(-iface "$iface")
    user_sets --iface || coll+=(--iface "$iface")
fi
extra=${MPIEXEC_FLAGS:-}
settings=()
case " $extra " in *" -bind-to "*) ;; *) settings+=(-bind-to none) ;; esac
flags+=("${settings[@]}")
[ -z "$root" ] || flags+=(-genv COLLBENCH_ROOT "$root")
read -ra extra_flags <<<"$extra" # MPIEXEC_FLAGS is a list of flags
cmd=("${MPIEXEC:-mpiexec}" "${flags[@]}" "${extra_flags[@]}" "${COLLBENCH:-collbench}" run "${coll[@]}" "${run_args[@]}")
{
    echo "$me: $n ranks on $nodes nodes, $ppn per node"
    echo "$me: MPI settings: ${settings[*]:-none added} ${extra:+; MPIEXEC_FLAGS: $extra}"
    echo "$me: ${cmd[*]}"
} >&2
[ "$dry" = 0 ] || exit 0
exec "${cmd[@]}"
