#!/usr/bin/env bash
# collbench under OpenMPI's mpirun: one rank per node by default, OpenMPI's own TCP traffic pinned to the
# same interface collbench's TCP path uses, so `--transport tcp,mpi` compares like with like.
#
# Usage: launch/mpirun-openmpi.sh (-H node1,node2[,...] | -f HOSTFILE) [-i IFACE] [-p RANKS_PER_NODE]
#                                 [-r HOST:PORT] [-n] [-- collbench run flags]
#   e.g. launch/mpirun-openmpi.sh -H n1,n2,n3,n4 -i eth0 -- -e 1G --collective all_reduce,all_gather
#   -f: an OpenMPI hostfile ("node slots=N" lines); -p then places RANKS_PER_NODE on every node of it.
#   -r: the rendezvous address (COLLBENCH_ROOT, an address of the first node); needed when collbench was
#       built without MPI (then also pass -- --transport tcp). A COLLBENCH_ROOT already set is passed on.
#   -n: print the mpirun command and exit.
# Flags after -- win: -- --iface X or -- --transport tcp replace the script's own (-i, tcp,mpi).
# MPI settings: --bind-to none and --mca mpi_yield_when_idle 1 unless MPIRUN_FLAGS sets them (ranks that
# outnumber the cores, or share them with other nodes' ranks, busy-poll otherwise and MPI's small messages
# come out many times slower than they are); --mca odls_base_sigkill_timeout 5: when a rank dies, mpirun
# sends the others SIGTERM (collbench ignores it under mpirun) and SIGKILL this many seconds later, time
# for them to agree on and print the "Culprit:" line. The settings used go to stderr.
# Environment: COLLBENCH (binary, default: collbench on PATH), MPIRUN (default: mpirun),
#              MPIRUN_FLAGS (extra mpirun flags, e.g. "--mca btl_tcp_links 4" or "--mca plm_rsh_agent X").
# Exit status: collbench's (see launch/README.md), or mpirun's own when it could not start or a rank was
#              killed by a signal.
set -euo pipefail

me=mpirun-openmpi.sh
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
        -h|--help) sed -n '2,23p' "$0"; exit 0 ;;
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
    # Nodes: lines that are not blank or comments.
    nodes=$(grep -cvE '^[[:space:]]*(#|$)' "$hostfile" || true)
    flags+=(--hostfile "$hostfile")
elif [ -n "$hosts" ]; then
    nodes=$(tr ',' '\n' <<<"$hosts" | grep -c . || true)
    flags+=(--host "$(tr ',' '\n' <<<"$hosts" | grep . | sed "s/\$/:$ppn/" | paste -sd, -)")
else
    echo "$me: the nodes are required: -H node1,node2,... or -f HOSTFILE" >&2; exit 2
fi
[ "$nodes" -gt 0 ] || { echo "$me: no nodes in ${hostfile:-$hosts}" >&2; exit 2; }
n=$((nodes * ppn))
flags+=(-np "$n" --map-by "ppr:$ppn:node" --mca pml ob1 --mca btl "tcp,self")

# Flags after -- replace the script's own: does the user's collbench command line set this flag?
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
    flags+=(--mca btl_tcp_if_include "$iface" --mca oob_tcp_if_include "$iface")
    user_sets --iface || coll+=(--iface "$iface")
fi

# The MPI settings a fair comparison needs, unless MPIRUN_FLAGS chose its own.
extra=${MPIRUN_FLAGS:-}
settings=()
case " $extra " in *" --bind-to "* | *" --bind-to="*) ;; *) settings+=(--bind-to none) ;; esac
case " $extra " in *mpi_yield_when_idle*) ;; *) settings+=(--mca mpi_yield_when_idle 1) ;; esac
case " $extra " in *odls_base_sigkill_timeout*) ;; *) settings+=(--mca odls_base_sigkill_timeout 5) ;; esac
flags+=("${settings[@]}")
[ -z "$root" ] || flags+=(-x "COLLBENCH_ROOT=$root")
[ "$(id -u)" = 0 ] && flags+=(--allow-run-as-root)

cores=$(nproc 2>/dev/null || echo 1)
over=""
[ "$ppn" -le "$cores" ] || over=" ($ppn ranks per node on $cores cores here: oversubscribed)"
read -ra extra_flags <<<"$extra" # MPIRUN_FLAGS is a list of flags
cmd=("${MPIRUN:-mpirun}" "${flags[@]}" "${extra_flags[@]}" "${COLLBENCH:-collbench}" run "${coll[@]}" "${run_args[@]}")
{
    echo "$me: $n ranks on $nodes nodes, $ppn per node$over"
    echo "$me: MPI settings: ${settings[*]:-none added} ${extra:+; MPIRUN_FLAGS: $extra}"
    echo "$me: ${cmd[*]}"
} >&2
[ "$dry" = 0 ] || exit 0
exec "${cmd[@]}"
