#!/usr/bin/env bash
# How often `collbench preflight` (defaults, `--budget 45`) names the right host or link, with the right
# cause, and nothing else, on 4 namespace hosts with one fault each: the scenarios of
# tests/preflight_causes_netns.rs run ROUNDS times, and its clean-cluster-beside-a-CPU-hog scenario run until
# it has CLEAN preflights (two per test run). Each preflight's report is kept (COLLBENCH_PREFLIGHT_OUTCOMES)
# and the table is computed from the reports, not from the tests' pass or fail.
#
#   tests/bench/preflight-accuracy.sh [OUT]    (root; OUT defaults to results/preflight-accuracy)
#
# Environment: ROUNDS (default 4), CLEAN (default 20); SUMMARY_ONLY=1 makes the table again from the kept
# reports without running anything.
# Writes OUT/outcomes/*.json (one per preflight, whole), OUT/runs.jsonl (a line per preflight: scenario,
# exit status, time, verdict, the checks that did not pass), OUT/table.md and OUT/tests.log.
cd "$(dirname "$0")/../.." || exit
set -euo pipefail
out=${1:-$PWD/results/preflight-accuracy}
rounds=${ROUNDS:-4}
clean=${CLEAN:-20}
log() { printf 'preflight-accuracy: %s\n' "$*" >&2; }
[[ $(id -u) == 0 ]] || {
  log "FAIL: needs root to build network namespaces"
  exit 1
}
if [[ ${SUMMARY_ONLY:-} != 1 ]]; then
  mkdir -p "$out/outcomes"
  rm -f "$out"/outcomes/*.json "$out/tests.log"
  export COLLBENCH_PREFLIGHT_OUTCOMES=$out/outcomes
  cargo test --test preflight_causes_netns --no-run --quiet
  # A failed test is counted from its reports like any other run; the test's own verdict goes to the log.
  for ((r = 1; r <= rounds; r++)); do
    log "round $r of $rounds: every scenario"
    cargo test --quiet --test preflight_causes_netns -- --test-threads=1 >>"$out/tests.log" 2>&1 || true
  done
  while (($(find "$out/outcomes" -name 'hog*' | wc -l) < clean)); do
    log "clean cluster beside a CPU hog: $(find "$out/outcomes" -name 'hog*' | wc -l) of $clean"
    cargo test --quiet --test preflight_causes_netns -- --exact a_clean_cluster_beside_a_cpu_hog_names_nothing \
      >>"$out/tests.log" 2>&1 || true
  done
fi
python3 - "$out" >"$out/table.md" <<'EOF'
import json, pathlib, re, sys

out = pathlib.Path(sys.argv[1])
# scenario label -> (what it is, [(the hosts of one fault, the finding's expected cause)]); the two-fault
# scenario has two faults, each to be named with its own cause.
expect = {
    "quota": ("one host's rank under a 0.02-core CPU quota", [([1], "cpu")]),
    "netns-quota": ("the same, the rank behind `ip netns exec` (cgroup found via /proc)", [([1], "cpu")]),
    "hidden-quota": ("the same, no cgroup visible at all (the rank's CPU wait)", [([1], "cpu")]),
    "loss": ("one host dropping 10% of its packets", [([2], "loss")]),
    "flap": ("one host's link down 1 s in every 3 s", [([2], "link")]),
    "police": ("one host dropping what it receives beyond 4 MB/s", [([2], None)]),
    "pair": ("one pair shaped to 100 Mbit/s", [([1, 3], "link")]),
    "host": ("one host shaped to 100 Mbit/s", [([2], "link")]),
    "two": ("two faults: one host shaped, another's rank under a CPU quota", None),
    "overlay-mtu": ("one host's eth0 lowered to MTU 1400 under its VXLAN at 1450", [([2], "configuration")]),
    "soak": ("one host's switch port at 20 Mbit/s 3 s in every 6 s (`--soak 30s`)", [([2], "link")]),
    "hog": ("clean cluster beside a CPU hog", []),
}
def names(text, host):
    return re.search(re.escape(host) + r"(?!\d)", text) is not None
def two_faults(o):
    # The two-fault test says which host is which in its outcome (`faults`), else shaped h2 and starved h1.
    return [(f["hosts"], f["cause"]) for f in o.get("faults", [])] or [([2], "link"), ([1], "cpu")]
rows = {}
runs = []
for f in sorted(out.glob("outcomes/*.json"), key=lambda f: int(f.stem.rsplit("-", 1)[1])):
    o = json.loads(f.read_text())
    runs.append({
        "scenario": o["scenario"], "code": o["code"], "elapsed_s": round(o["elapsed_s"], 1),
        "verdict": o["report"].get("verdict"),
        "not_passed": [{k: c.get(k) for k in ("name", "verdict", "cause", "measured")}
                       for c in o["report"]["checks"] if c["verdict"] != "pass"],
    })
    key = re.sub(r"\d+$", "", o["scenario"])
    if key not in expect:
        continue
    what, faults = expect[key]
    faults = two_faults(o) if faults is None else faults
    hosts = o["hosts"]
    failed = [c for c in o["report"]["checks"] if c["verdict"] == "fail"]
    about = lambda c: f'{c["name"]} {c.get("measured", "")} {c.get("detail", "")}'
    quota = lambda c: "CPU quota" in about(c)
    hit = lambda at: [c for c in failed if all(names(about(c), hosts[h]) for h in at)]
    # The receive side: a finding that says the host is slow to receive, whatever its cause word.
    right = lambda at, cause: any(
        (cause is None and "receive" in about(c)) or c.get("cause") == cause or (cause == "cpu" and quota(c))
        for c in hit(at))
    faulty = {h for at, _ in faults for h in at}
    on_target = bool(faults) and all(hit(at) for at, _ in faults)
    right_cause = bool(faults) and all(right(at, cause) for at, cause in faults)
    false_alarm = any(
        names(about(c), hosts[h]) for c in failed for h in range(len(hosts)) if h not in faulty
    ) or (not faults and bool(failed))
    r = rows.setdefault(key, dict(what=what, runs=0, target=0, cause=0, false=0, times=[], over=0, verdicts={},
                                  named=0))
    r["runs"] += 1
    v = o["report"].get("verdict", "?")
    r["verdicts"][v] = r["verdicts"].get(v, 0) + 1
    r["target"] += on_target if faults else (not failed)
    r["cause"] += right_cause if faults else (not failed)
    r["false"] += bool(false_alarm)
    # A clean run "names a host" when any check that did not pass (a WARN included) names one.
    warned = [c for c in o["report"]["checks"] if c["verdict"] != "pass"]
    r["named"] += any(names(about(c), h) for c in warned for h in hosts)
    r["times"].append(o["elapsed_s"])
    r["over"] += o["elapsed_s"] > o["budget_s"]
(out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
print("| scenario | runs | right target | right cause | false alarms | verdicts | time, s (min / median / max) | over budget |")
print("|---|---|---|---|---|---|---|---|")
hog = rows.get("hog")
for key in expect:
    if key not in rows:
        continue
    r = rows[key]
    t = sorted(r["times"])
    med = t[len(t) // 2] if len(t) % 2 else (t[len(t) // 2 - 1] + t[len(t) // 2]) / 2
    target = f'{r["target"]}/{r["runs"]}' if expect[key][1] != [] else f'{r["target"]}/{r["runs"]} (nothing failed)'
    verdicts = ", ".join(f"{n} {v.upper()}" for v, n in sorted(r["verdicts"].items()))
    print(f'| {r["what"]} | {r["runs"]} | {target} | {r["cause"]}/{r["runs"]} | {r["false"]} | {verdicts} | '
          f'{t[0]:.0f} / {med:.0f} / {t[-1]:.0f} | {r["over"]} |')
if hog:
    print()
    print(f'Clean runs beside the hog that named a host in any check, a warning included: {hog["named"]} of '
          f'{hog["runs"]}.')
EOF
log "table in $out/table.md"
cat "$out/table.md"
