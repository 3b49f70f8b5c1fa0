#!/usr/bin/env bash
# The ring with its chunk from the model (`--algo pring`) against the plain ring and the medium-size
# algorithms, at medium sizes on shaped namespace hosts. One mpirun job per algorithm, each with OpenMPI's
# TCP BTL taking turns at every point (--interleave point), so every algorithm is read as a ratio to the same
# OpenMPI measured beside it: ratios across jobs stay comparable though the machine drifts between them.
#
#   tests/bench/pipelined-ring.sh HOSTS RATE [ALGO...]   (root; ALGOs default: ring pring rhd)
#
# Writes OUT/HOSTS-RATE/ALGO.json and table ALGO.txt, then summary.txt: per collective and size, the median
# over sweeps of each algorithm's p50 and its ratio to OpenMPI's. A model is fitted first (`collbench model`
# on a 2-host and a 3-host ring/rd run) and given to every job as --algo-model, so pring's chunk is the
# model's. OUT: PRING_OUT, default results/tcp-vs-mpi/pipelined-ring. COLLBENCH: the binary (--features mpi).
cd "$(dirname "$0")/../.." || exit
name=cbr$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh

hosts=${1:?HOSTS} rate=${2:?RATE}
shift 2
algos=("$@")
((${#algos[@]})) || algos=(ring pring rhd)
out=${PRING_OUT:-$repo/results/tcp-vs-mpi/pipelined-ring}/$hosts-$rate
need_namespaces
need_collbench --features mpi
mkdir -p "$out"
trap cleanup EXIT
cluster_up "$hosts" --rate "$rate" --cc "${PRING_CC:-reno}"
cidr=$(bash "$harness" cidr "$name" eth0)

# mpirun -np N collbench run ARGS... on the first N hosts.
job() {
  local n=$1
  shift
  bash "$harness" exec "$name" 0 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$n" \
    --hostfile "$(bash "$harness" hostfile "$name")" --mca plm_rsh_agent "$(bash "$harness" rsh-agent "$name")" \
    --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
    --mca btl_tcp_if_include "$cidr" --mca oob_tcp_if_include "$cidr" \
    "$COLLBENCH" run "$@"
}

# The model: the ring and recursive doubling on 2 and 3 hosts, 8 B to 8 MiB.
for n in 2 3; do
  for a in ring rd; do
    job "$n" --collective all_reduce -b 8 -e 8M -f 4 -n 10 -w 3 --transport tcp@eth0 --algo "$a" \
      -J "$out/fit-$n-$a.json" >/dev/null 2>"$out/fit-$n-$a.err" || die "fit run $n $a: $(tail -3 "$out/fit-$n-$a.err")"
  done
done
"$COLLBENCH" model "$out"/fit-*.json --target-ranks "$hosts" -J "$out/model.json" >"$out/model.txt" || die "collbench model failed"
rm -f "$out"/fit-*.err

for a in "${algos[@]}"; do
  log "$hosts hosts at $rate: --algo $a"
  job "$hosts" --collective all_reduce,all_gather -b 256K -e 16M -f 4 -n 10 -w 3 --repeat 3 --percentiles \
    --interleave point --transport tcp@eth0,mpi --algo "$a" --algo-model "$out/model.json" -T 300 \
    -J "$out/$a.json" >"$out/$a.txt" 2>"$out/$a.err" || die "--algo $a: $(tail -3 "$out/$a.err")"
done

python3 - "$out" "${algos[@]}" >"$out/summary.txt" <<'PY'
import json, os, statistics, sys
d, algos = sys.argv[1], sys.argv[2:]
rows = {}
for a in algos:
    doc = json.load(open(os.path.join(d, a + ".json")))
    for r in doc["results"]:
        side = "mpi" if r["path"] == "mpi" else "tcp"
        rows.setdefault((r["collective"], r["size"], a, side), []).append(r["collbench"]["out_of_place"]["p50_us"])
        if side == "tcp":
            rows.setdefault((r["collective"], r["size"], a, "algo"), []).append(r["algo"])
print("median over sweeps of each point's p50 (us); ratio: collbench / OpenMPI of the same job; spread: max/min - 1")
print(f"{'collective':12} {'size':>9} " + " ".join(f"{a + ' us':>12} {'ratio':>6} {'spread':>6}" for a in algos))
for coll, size in sorted({(k[0], k[1]) for k in rows}):
    cells = []
    for a in algos:
        t, m = rows.get((coll, size, a, "tcp")), rows.get((coll, size, a, "mpi"))
        if not t or not m:
            cells.append(f"{'-':>12} {'-':>6} {'-':>6}")
            continue
        cells.append(f"{statistics.median(t):12.0f} {statistics.median(t) / statistics.median(m):6.2f} "
                     f"{100 * (max(t) / min(t) - 1):5.0f}%")
    print(f"{coll:12} {size:>9} " + " ".join(cells))
PY
log "wrote $out/summary.txt"
