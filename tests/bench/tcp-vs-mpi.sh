#!/usr/bin/env bash
# collbench's TCP path and OpenMPI's collectives over its TCP transport, measured side by side in one job
# (`--transport tcp,mpi`, the two paths taking turns at every point, --repeat sweeps), in three set-ups:
#   loopback  4 ranks under mpirun on this host (OpenMPI: btl tcp,self on lo)
#   hosts     4 namespace hosts (tests/netns/cluster.sh), one rank each, tcp@eth0 vs mpi over eth0
#   shaped    the same with every host's eth0 egress shaped to 1 Gbit/s (tc tbf), --line-rate 1
# then writes OUT/README.md: issue 6's targets 1-3 (line-rate share, time vs MPI, 8 B latency), the
# measured figures and whether each is met. Nothing here asserts speed; it records what was measured.
# Each case runs two jobs: the size sweep, and the 8 B all_reduce alone with many iterations (a few
# iterations of a latency point measure the machine's scheduling noise, not the path).
#
#   tests/bench/tcp-vs-mpi.sh [OUT]            (root; OUT defaults to results/tcp-vs-mpi)
#   tests/bench/tcp-vs-mpi.sh --summary [OUT]  only rewrite OUT/README.md from OUT/*/results.json
#
# Writes OUT/machine.txt (CPUs, memory, kernel, MPI) and OUT/{loopback,hosts,shaped}/: results.json (-J),
# table.txt (rank 0's stdout), stderr.txt, and busbw/latency charts (SVG, `collbench plot`) of the
# sweep; latency.json, latency-table.txt and latency-stderr.txt of the 8 B job. Paths in the records are
# relative to the repository root.
#
# Environment:
#   COLLBENCH             the binary, built with --features mpi (default: target/release/collbench, built
#                         with `cargo build --release --features mpi` when COLLBENCH is not set)
#   COLLBENCH_BENCH_ARGS  the sweep of the loopback and hosts cases (default below)
#   COLLBENCH_SHAPED_ARGS the sweep of the shaped case (default below: fewer iterations, as a 64 MiB
#                         all_reduce takes 0.9 s there and OpenMPI's 1.6 s)
#   COLLBENCH_LAT_ARGS    the 8 B latency job (default below)
#   COLLBENCH_HOSTS_CC    the namespace hosts' default TCP congestion control, for both paths (default reno,
#                         which every Linux kernel has: new namespaces otherwise inherit the machine's choice,
#                         and with bbr the shaped ring lost 2-5% of the line rate in some iterations where
#                         reno held 95%; `host` keeps the inherited one). Loopback keeps the machine's.
cd "$(dirname "$0")/../.." || exit
name=cbm$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
hosts=4
# 20 iterations a point (nccl-tests' default) in 5 sweeps: at 1-8 MiB single iterations here take 5-20
# times the median when a rank is scheduled late, so fewer samples leave a point's mean to chance. The paths
# take turns at every point (--interleave point): this machine has slow spells of 30 s and more, longer than
# a point and shorter than a sweep, and with whole sweeps taking turns one spell met one path's sweep alone.
default_args="--collective all_reduce,all_gather -b 8 -e 64M -n 20 -w 3 --repeat 5 --interleave point -T 120"
read -r -a sweep <<<"${COLLBENCH_BENCH_ARGS:-$default_args}"
default_shaped="--collective all_reduce,all_gather -b 8 -e 64M -n 10 -w 2 --repeat 3 --interleave point -T 120"
read -r -a shapedsweep <<<"${COLLBENCH_SHAPED_ARGS:-$default_shaped}"
default_lat="--collective all_reduce -b 8 -e 8 -n 500 -w 50 --repeat 3 -T 60"
read -r -a latsweep <<<"${COLLBENCH_LAT_ARGS:-$default_lat}"
hosts_cc=${COLLBENCH_HOSTS_CC:-reno}
ccflag=()
[[ $hosts_cc == host ]] || ccflag=(--cc "$hosts_cc")

# The summary: issue 6's targets 1-3 from the comparison each results.json carries (collbench combines the
# --repeat sweeps of a path into one time per point, with a 95% interval).
summarize() {
  local dir=$1
  python3 - "$dir" "$repo" >"$dir/README.md" <<'PY'
import json, os, sys

out, repo = sys.argv[1], sys.argv[2]
MIB = 1 << 20
cases = [("loopback", "4 ranks on this host, loopback"),
         ("hosts", "4 namespace hosts, unshaped"),
         ("shaped", "4 namespace hosts, eth0 shaped to 1 Gbit/s")]


def read(case, name="results.json"):
    """A case's whole JSON record, or None where that job did not run."""
    path = os.path.join(out, case, name)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load(case, name="results.json"):
    doc = read(case, name)
    return None if doc is None else doc["collbench"]


def sweep_times(case):
    """{(collective, size, path): {sweep: out-of-place time in us}} from a case's results.json records."""
    doc = read(case)
    times = {}
    for r in [] if doc is None else doc["results"]:
        key = (r["collective"], r["size"], r["path"])
        times.setdefault(key, {})[r.get("repeat", 0)] = r["out_of_place"]["time"]
    return times


def sweep_ratios(times, coll, sz, tpath):
    """collbench / MPI per interleaved sweep (sweep k of each path), as 'min / median / max', or '-'."""
    t, m = times.get((coll, sz, tpath), {}), times.get((coll, sz, "mpi"), {})
    r = sorted(t[k] / m[k] for k in t if k in m and m[k] > 0)
    if not r:
        return "-"
    return f"{r[0]:.2f} / {r[len(r) // 2]:.2f} / {r[-1]:.2f}"


def size(b):
    for unit, s in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if b >= 1 << s:
            return f"{b >> s} {unit}"
    return f"{b} B"


def apart(t, m):
    """Whether the two times differ by more than both 95% intervals together (a conservative test)."""
    return "yes" if abs(t["time_us"] - m["time_us"]) > t["ci95_us"] + m["ci95_us"] else "no"


def pairs(doc):
    """(collective, size, collbench's path entry, mpi's entry) for every point both measured."""
    for c in doc["summary"].get("comparison", []):
        by = {p["path"]: p for p in c["paths"]}
        tcp = [p for name, p in by.items() if name.startswith("tcp")]
        if "mpi" in by and tcp:
            yield c["collective"], c["size"], tcp[0], by["mpi"]


def shown(args):
    """The command line as recorded, with any path under the repository shown relative to it."""
    root = repo.rstrip("/") + "/"
    return " ".join(a.replace(root, "") for a in args[1:])


docs = {case: load(case) for case, _ in cases}
lat = {case: load(case, "latency.json") for case, _ in cases}
lines = []
w = lines.append
w("# collbench TCP vs OpenMPI over TCP (issue 6)")
w("")
w("Generated by `tests/bench/tcp-vs-mpi.sh` from the `results.json` and `latency.json` files beside this")
# The run parameters: `params` since it was recorded, the serialised options before.
opts = next((d["run"].get("params") or d["run"].get("options", {}) for d in docs.values() if d), {})
turns = ("taking turns at every point (`--interleave point`) in each of its sweeps"
         if opts.get("interleave") == "point" else "taking turns by whole sweeps")
w(f"one. Each job runs both paths (`--transport tcp,mpi`), {turns}; a")
w("time is collbench's combination of its sweeps (time of the slowest rank, the default `-a max`), +- its")
w("95% interval.")
w("")
machine = os.path.join(out, "machine.txt")
if os.path.exists(machine):
    with open(machine) as f:
        w("Machine: " + "; ".join(l.strip() for l in f if l.strip()) + ".")
        w("")
for case, what in cases:
    for name, d in (("results.json", docs[case]), ("latency.json", lat[case])):
        if d is None:
            w(f"- `{case}/{name}`: {what}: not run")
            continue
        r = d["run"]
        w(f"- `{case}/{name}`: {what}; `{shown(r['args'])}`; start {r['start_time']}, "
          f"#wrong {d['summary']['wrong']}")
w("")
verdicts = []

# Target 1: shaped busbw at >= 16 MiB as a share of the line rate.
w("## Target 1: busbw at >= 16 MiB on 1 Gbit/s links, >= 90% of the line rate")
w("")
d = docs["shaped"]
if d is None:
    w("Not measured (no `shaped/results.json`).")
    verdicts.append(("1", "not measured"))
else:
    rate = {p["path"]: p.get("line_rate_gbs") for p in d["summary"].get("paths", [])}
    w("| collective | size | collbench busbw (GB/s) | % of line | MPI busbw (GB/s) | % of line | collbench / MPI |")
    w("|---|---|---|---|---|---|---|")
    worst = None
    for coll, sz, t, m in pairs(d):
        if sz < 16 * MIB:
            continue
        line = rate.get(t["path"]) or 0.125
        tp, mp = 100 * t["busbw"] / line, 100 * m["busbw"] / line
        worst = tp if worst is None else min(worst, tp)
        w(f"| {coll} | {size(sz)} | {t['busbw']:.4f} | {tp:.1f}% | {m['busbw']:.4f} | {mp:.1f}% | "
          f"{t['busbw'] / m['busbw']:.2f} |")
    w("")
    if worst is None:
        verdicts.append(("1", "not measured (no point >= 16 MiB)"))
    else:
        met = worst >= 90
        verdicts.append(("1", f"{'met' if met else 'NOT met'}: lowest collbench point {worst:.1f}% of line rate"))
        w(f"Lowest collbench point: {worst:.1f}% of the line rate: target {'met' if met else 'NOT met'}.")
w("")

# Target 2: collbench time / MPI time at every size >= 1 MiB, loopback and across hosts.
w("## Target 2: collbench time <= 0.8 x MPI's at every size >= 1 MiB (loopback and hosts)")
w("")
w("The last column is for reading only: the ratio within each sweep (sweep k of collbench against")
w("sweep k of MPI), min / median / max, which shows when one slow spell of either path decided a point.")
w("")
w("| case | collective | size | collbench (us) | MPI (us) | collbench / MPI | intervals apart | per sweep |")
w("|---|---|---|---|---|---|---|---|")
worst2 = {}
for case in ("loopback", "hosts", "shaped"):
    d = docs[case]
    if d is None:
        continue
    times = sweep_times(case)
    for coll, sz, t, m in pairs(d):
        if sz < MIB:
            continue
        ratio = t["time_us"] / m["time_us"]
        if case != "shaped":
            worst2[case] = max(worst2.get(case, 0), ratio)
        w(f"| {case} | {coll} | {size(sz)} | {t['time_us']:.0f} +- {t['ci95_us']:.0f} | "
          f"{m['time_us']:.0f} +- {m['ci95_us']:.0f} | {ratio:.2f} | {apart(t, m)} | "
          f"{sweep_ratios(times, coll, sz, t['path'])} |")
w("")
w("(The shaped rows are for reading only; the target is on loopback and unshaped hosts.)")
w("")
for case in ("loopback", "hosts"):
    if case not in worst2:
        verdicts.append((f"2 ({case})", "not measured"))
        continue
    met = worst2[case] <= 0.8
    verdicts.append((f"2 ({case})", f"{'met' if met else 'NOT met'}: worst ratio {worst2[case]:.2f}"))
    w(f"- {case}: worst ratio {worst2[case]:.2f}: target {'met' if met else 'NOT met'}.")
w("")

# Target 3: 8 B all_reduce latency, collbench vs MPI.
w("## Target 3: 8 B all_reduce latency <= MPI's (loopback and hosts)")
w("")
w("From each case's `latency.json` (the sweep's own 8 B point where that job did not run).")
w("")
w("| case | collbench (us) | MPI (us) | collbench / MPI | intervals apart |")
w("|---|---|---|---|---|")
for case in ("loopback", "hosts", "shaped"):
    d = lat[case] or docs[case]
    if d is None:
        continue
    for coll, sz, t, m in pairs(d):
        if coll != "all_reduce" or sz != 8:
            continue
        ratio = t["time_us"] / m["time_us"]
        w(f"| {case} | {t['time_us']:.1f} +- {t['ci95_us']:.1f} | {m['time_us']:.1f} +- {m['ci95_us']:.1f} "
          f"| {ratio:.2f} | {apart(t, m)} |")
        if case != "shaped":
            met = ratio <= 1
            verdicts.append((f"3 ({case})", f"{'met' if met else 'NOT met'}: {t['time_us']:.1f} us vs "
                                            f"{m['time_us']:.1f} us"))
w("")

# Target 5: peak resident memory per rank, from each sweep's own measurement (the same process, every rank).
w("## Target 5: peak memory per rank <= 3 x the largest message + 64 MiB")
w("")
w("| case | peak (MiB) | rank | host | bound (MiB) |")
w("|---|---|---|---|---|")
peaks = [(case, d["summary"]["peak_memory"]) for case, d in docs.items() if d and d["summary"].get("peak_memory")]
for case, pm in peaks:
    w(f"| {case} | {pm['max_bytes'] / MIB:.1f} | {pm['rank']} | {pm['host']} | {pm['bound_bytes'] / MIB:.1f} |")
w("")
if peaks:
    over = [case for case, pm in peaks if pm["max_bytes"] > pm["bound_bytes"]]
    top = max(pm["max_bytes"] for _, pm in peaks) / MIB
    verdicts.append(("5", f"{'NOT met: ' + ', '.join(over) if over else 'met'}: highest peak {top:.1f} MiB"))
else:
    verdicts.append(("5", "not measured"))

# For reading: what each path's sweeps cost in CPU per byte. With the ranks sharing the machine's CPUs, the
# CPUs rather than the network set both paths' pace, and CPU per byte is what the paths differ in.
w("## For reading: CPU per GB moved (every rank's CPU time over the bytes busbw counts)")
w("")
w("| case | path | sweeps (s) | CPU (s) | GB moved | CPU s/GB | vs MPI | busiest host's CPUs busy | limited by |")
w("|---|---|---|---|---|---|---|---|---|")
for case, _ in cases:
    d = docs[case]
    if d is None:
        continue
    costs = d["summary"].get("paths", [])
    ref = next((c["cpu_s_per_gb"] for c in costs if c["path"] == "mpi"), None)
    for c in costs:
        per = c.get("cpu_s_per_gb")
        vs = f"{per / ref:.2f}" if per and ref else "-"
        busy = c.get("host_busy_pct")
        w(f"| {case} | {c['path']} | {c['sweep_s']:.1f} | {c['cpu_s']:.1f} | {c['gb_moved']:.1f} | "
          f"{'-' if per is None else f'{per:.3f}'} | {vs} | {'-' if busy is None else f'{busy:.0f}%'} | "
          f"{'cpu' if c.get('cpu_limited') else '-'} |")
w("")

w("## Verdict")
w("")
w("| target | result |")
w("|---|---|")
for target, text in verdicts:
    w(f"| {target} | {text} |")
w("")
w("A verdict compares the combined times as measured; where the table says the intervals are not apart,")
w("the difference is within this run's noise (4 ranks sharing the machine's cores) and a rerun may flip it.")
w("Target 4 (reduction speed) is measured by `collbench selftest`, not by this script.")
print("\n".join(lines))
PY
}

if [[ ${1:-} == --summary ]]; then
  out=${2:-results/tcp-vs-mpi}
  [[ -d $out ]] || die "no folder $out to summarize"
  summarize "$out"
  log "wrote $out/README.md"
  exit 0
fi
# Relative to the repository root (the working directory), so the records name no checkout path.
out=${1:-results/tcp-vs-mpi}

need_namespaces
command -v mpirun >/dev/null || die "mpirun is not installed (Debian: apt-get install openmpi-bin)"
command -v python3 >/dev/null || die "python3 is needed for the summary (Debian: apt-get install python3)"
need_collbench --features mpi

# OpenMPI refuses root unless told; ranks must not inherit another launcher's identity from this shell.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset RANK WORLD_SIZE MASTER_ADDR MASTER_PORT COLLBENCH_ROOT SLURM_JOB_ID PMI_RANK PMIX_RANK

trap cleanup EXIT
trap 'exit 130' INT TERM

# mpirun flags of every case: OpenMPI's TCP transport only (no shared memory), ob1, no core binding (all
# ranks share this machine's cores), and yielding when idle (2 cores, 4 busy-polling ranks otherwise).
mpi_common=(--oversubscribe --bind-to none -np "$hosts" --mca btl "tcp,self" --mca pml ob1
  --mca mpi_yield_when_idle 1)

# Draws the charts of case folder $1.
finish() {
  local dir=$1
  "$COLLBENCH" plot "$dir/results.json" --out "$dir" --format svg >/dev/null
  log "$dir: done"
}

# One job: $1 the folder, $2 the job (results: the sweep, latency: the 8 B job), then the command
# (mpirun ...) whose stdout is the table.
run_job() {
  local dir=$1 job=$2
  shift 2
  local json=$dir/$job.json table=$dir/table.txt errs=$dir/stderr.txt
  if [[ $job == latency ]]; then
    table=$dir/latency-table.txt errs=$dir/latency-stderr.txt
  fi
  mkdir -p "$dir"
  rm -f "$json"
  local rc=0
  "$@" >"$table" 2>"$errs" || rc=$?
  ((rc == 0)) || die "mpirun exited $rc in $dir ($job): $(tail -5 "$errs")"
  [[ -s $json ]] || die "no $job.json in $dir (see $errs)"
}

# What the figures depend on most here: how many CPUs the ranks share, the CPU, the kernel, OpenMPI.
mkdir -p "$out"
{
  echo "$(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1))"
  awk '/MemTotal/ {printf "%.0f GiB memory\n", $2 / 1048576}' /proc/meminfo
  echo "Linux $(uname -r), TCP congestion control $(sysctl -n net.ipv4.tcp_congestion_control) (loopback)"
  if [[ $hosts_cc == host ]]; then
    echo "namespace hosts' TCP congestion control: the machine's (inherited)"
  else
    echo "namespace hosts' TCP congestion control: $hosts_cc (cluster.sh up --cc)"
  fi
  mpirun --version 2>&1 | head -1
} >"$out/machine.txt"

log "loopback: $hosts ranks on this host, OpenMPI over TCP on lo"
rm -f "$out"/loopback/*.png "$out"/loopback/*.svg
for job in results latency; do
  if [[ $job == results ]]; then args=("${sweep[@]}"); else args=("${latsweep[@]}"); fi
  run_job "$out/loopback" "$job" mpirun "${mpi_common[@]}" \
    --mca btl_tcp_if_include lo --mca oob_tcp_if_include lo \
    "$COLLBENCH" run "${args[@]}" --transport tcp,mpi --reference mpi -J "$out/loopback/$job.json"
done
finish "$out/loopback"

# Across hosts: mpirun inside h0 (from the root namespace its daemons could not call back), its daemons
# started in the other hosts by the cluster's rsh agent, both OpenMPI's and collbench's traffic on eth0.
hosts_case() {
  local dir=$1 sweepargs
  shift
  read -r -a sweepargs <<<"$1"
  shift
  local cidr hostfile agent
  cidr=$(bash "$harness" cidr "$name" eth0)
  hostfile=$(bash "$harness" hostfile "$name")
  agent=$(bash "$harness" rsh-agent "$name")
  rm -f "$dir"/*.png "$dir"/*.svg
  local job args
  for job in results latency; do
    if [[ $job == results ]]; then args=("${sweepargs[@]}"); else args=("${latsweep[@]}"); fi
    run_job "$dir" "$job" bash "$harness" exec "$name" 0 mpirun "${mpi_common[@]}" \
      --hostfile "$hostfile" --mca plm_rsh_agent "$agent" \
      --mca btl_tcp_if_include "$cidr" --mca oob_tcp_if_include "$cidr" \
      "$COLLBENCH" run "${args[@]}" --transport tcp@eth0,mpi --reference mpi -J "$dir/$job.json" "$@"
  done
  finish "$dir"
}

log "hosts: $hosts namespace hosts, unshaped eth0 (MTU 1500)"
cluster_up "$hosts" "${ccflag[@]}"
hosts_case "$out/hosts" "${sweep[*]}"
cluster_down

log "shaped: every host's eth0 egress at 1 Gbit/s (tbf)"
cluster_up "$hosts" --rate 1gbit "${ccflag[@]}"
hosts_case "$out/shaped" "${shapedsweep[*]}" --line-rate 1
cluster_down

summarize "$out"
log "wrote $out (summary: $out/README.md)"
