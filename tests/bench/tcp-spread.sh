#!/usr/bin/env bash
# Why a point's time moves between sweeps (issue 53): one interleaved job, collbench's tcp@eth0 and OpenMPI
# taking turns at every point, with per-iteration times (-I 1), while a sampler records every 0.25 s the TCP
# state of host 1's connections (`ss -tin`: cwnd, rtt, rto, lastsnd) and the scheduler statistics of every
# collbench process on the machine (/proc/PID/schedstat: time on a CPU, time waiting for one; other jobs'
# included, which the summary lists too). The hosts' net.ipv4.tcp_slow_start_after_idle
# is set as asked, so runs with 0 and 1 taken in turns tell whether restarting idle connections in slow
# start moves the figures.
#
#   tests/bench/tcp-spread.sh TAG HOSTS RATE SSAI [RUN ARGS...]   (root)
#   tests/bench/tcp-spread.sh --summary DIR                       print what DIR (one TAG's folder) shows
#
# Writes OUT/TAG/ (OUT: SPREAD_OUT, default results/tcp-vs-mpi/spread): results.json, table.txt, stderr.txt
# and samples.txt (the sampler's lines: `T EPOCH`, `ss -tin` output, `S PID SCHEDSTAT`; large, not kept in
# the repository), then summary.txt from --summary. RUN ARGS default to the sizes where the issue saw the
# spread: all_reduce and all_gather, 512 KiB to 8 MiB, 10 iterations, 5 sweeps.
#
# Environment: COLLBENCH (the binary, built with --features mpi; default target/release/collbench, built when
# not set), SPREAD_CC (the hosts' TCP congestion control, default reno), SPREAD_OUT.
cd "$(dirname "$0")/../.." || exit
name=cbp$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh

summary() {
  python3 - "$1" <<'PY'
import json, os, re, statistics, sys

d = sys.argv[1]
doc = json.load(open(os.path.join(d, "results.json")))
pts = {}
for r in doc["results"]:
    o = dict(r["out_of_place"])
    o.update(r.get("out_of_place_per_iter") or {})
    key = (r["collective"], r["size"], "mpi" if r["path"] == "mpi" else "tcp")
    pts.setdefault(key, []).append((r.get("repeat", 0), o["p50_us"], r["algo"], o.get("times_us", [])))
print("per point: p50 of each sweep (us), spread (max/min - 1), collbench / OpenMPI (medians)")
for k in sorted(pts):
    v = sorted(pts[k])
    p = [x[1] for x in v]
    ratio = ""
    if k[2] == "tcp" and (k[0], k[1], "mpi") in pts:
        ratio = f"  ratio {statistics.median(p) / statistics.median(x[1] for x in pts[(k[0], k[1], 'mpi')]):.2f}"
    print(f"  {k[0]:10} {k[1]:>9} {k[2]:3} {v[0][2]:16} " + " ".join(f"{x:8.0f}" for x in p)
          + f"  spread {100 * (max(p) / min(p) - 1):4.0f}%{ratio}")
print("per iteration (ms), collbench, the sweep with the largest and the smallest p50 of each point:")
for k in sorted(pts):
    if k[2] != "tcp":
        continue
    v = sorted(pts[k], key=lambda x: x[1])
    for label, s in (("fast", v[0]), ("slow", v[-1])):
        print(f"  {k[0]:10} {k[1]:>9} {label} sweep {s[0]}: " + " ".join(f"{t / 1e3:.1f}" for t in s[3]))
# The sampler: TCP state of host 1's eth0 connections, and every rank's time on and waiting for a CPU.
rtt, idle, n, first, last, now = [], 0, 0, {}, {}, None
for line in open(os.path.join(d, "samples.txt")):
    if line.startswith("T "):
        now = float(line.split()[1])
    elif line.startswith("S "):
        f = line.split()
        if len(f) >= 5:
            first.setdefault(f[1], (now, int(f[2]), int(f[3])))
            last[f[1]] = (now, int(f[2]), int(f[3]))
    elif "mss:1448" in line:
        m = dict(re.findall(r"(\w+):([\d.]+)", line))
        n += 1
        rtt.append(float(m["rtt"]))
        if "lastsnd" in m and int(m["lastsnd"]) > float(m["rto"]):
            idle += 1
if rtt:
    print(f"host 1's eth0 connections, {n} samples: rtt (ms) deciles "
          + " ".join(f"{x:.2f}" for x in statistics.quantiles(rtt, n=10))
          + f"; idle longer than their rto in {100 * idle / n:.0f}% of samples")
for pid in first:
    a, b = first[pid], last[pid]
    wall = b[0] - a[0]
    if wall > 10:
        print(f"  process {pid}: {wall:.0f} s, on a CPU {100 * (b[1] - a[1]) / 1e9 / wall:.0f}%, "
              f"waiting for one {100 * (b[2] - a[2]) / 1e9 / wall:.0f}%")
PY
}

if [[ ${1:-} == --summary ]]; then
  summary "${2:?--summary DIR}"
  exit
fi
tag=${1:?TAG} hosts=${2:?HOSTS} rate=${3:?RATE} ssai=${4:?SSAI (0 or 1)}
shift 4
[[ $ssai == 0 || $ssai == 1 ]] || die "SSAI must be 0 or 1 (net.ipv4.tcp_slow_start_after_idle), got '$ssai'"
args=("$@")
((${#args[@]})) || read -r -a args <<<"--collective all_reduce,all_gather -b 512K -e 8M -f 4 -n 10 -w 3 --repeat 5"
out=${SPREAD_OUT:-$repo/results/tcp-vs-mpi/spread}/$tag
need_namespaces
need_collbench --features mpi
mkdir -p "$out"
sampler=
trap '[[ -n $sampler ]] && kill "$sampler" 2>/dev/null; cleanup' EXIT
cluster_up "$hosts" --rate "$rate" --cc "${SPREAD_CC:-reno}"
for ((h = 0; h < hosts; h++)); do
  bash "$harness" exec "$name" "$h" sysctl -q -w net.ipv4.tcp_slow_start_after_idle="$ssai"
done
host1=$(bash "$harness" hosts "$name" | sed -n 2p)
(
  while true; do
    echo "T $(date +%s.%N)"
    ip netns exec "$host1" ss -tin state established 2>/dev/null || true
    for p in $(pgrep -x collbench || true); do
      echo "S $p $(cat "/proc/$p/schedstat" 2>/dev/null || true)"
    done
    sleep 0.25
  done
) >"$out/samples.txt" &
sampler=$!
cidr=$(bash "$harness" cidr "$name" eth0)
bash "$harness" exec "$name" 0 mpirun --allow-run-as-root --oversubscribe --bind-to none -np "$hosts" \
  --hostfile "$(bash "$harness" hostfile "$name")" --mca plm_rsh_agent "$(bash "$harness" rsh-agent "$name")" \
  --mca btl tcp,self --mca pml ob1 --mca mpi_yield_when_idle 1 \
  --mca btl_tcp_if_include "$cidr" --mca oob_tcp_if_include "$cidr" \
  "$COLLBENCH" run "${args[@]}" --interleave point --percentiles -I 1 -T 300 --transport tcp@eth0,mpi \
  -J "$out/results.json" >"$out/table.txt" 2>"$out/stderr.txt" || die "mpirun failed: $(tail -5 "$out/stderr.txt")"
summary "$out" >"$out/summary.txt"
log "wrote $out (summary.txt)"
