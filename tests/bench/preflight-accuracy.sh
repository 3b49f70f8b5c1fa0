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
# scenario label -> (what it is, the hosts at fault, the finding's expected cause)
expect = {
    "quota": ("one host's rank under a 0.02-core CPU quota", [1], "cpu"),
    "loss": ("one host dropping 10% of its packets", [2], "loss"),
    "pair": ("one pair shaped to 100 Mbit/s", [1, 3], "link"),
    "host": ("one host shaped to 100 Mbit/s", [2], "link"),
    "hog": ("clean cluster beside a CPU hog", [], None),
}
def names(text, host):
    return re.search(re.escape(host) + r"(?!\d)", text) is not None
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
    what, at, cause = expect[key]
    hosts = o["hosts"]
    failed = [c for c in o["report"]["checks"] if c["verdict"] == "fail"]
    about = lambda c: f'{c["name"]} {c.get("measured", "")} {c.get("detail", "")}'
    on_target = [c for c in failed if at and all(names(about(c), hosts[h]) for h in at)]
    quota = lambda c: "CPU quota" in about(c)
    right_cause = any(c.get("cause") == cause or (cause == "cpu" and quota(c)) for c in on_target)
    false_alarm = any(
        names(about(c), hosts[h]) for c in failed for h in range(len(hosts)) if h not in at
    ) or (not at and failed)
    r = rows.setdefault(key, dict(what=what, runs=0, target=0, cause=0, false=0, times=[], over=0, verdicts={}))
    r["runs"] += 1
    v = o["report"].get("verdict", "?")
    r["verdicts"][v] = r["verdicts"].get(v, 0) + 1
    r["target"] += bool(on_target) if at else (not failed)
    r["cause"] += right_cause if at else (not failed)
    r["false"] += bool(false_alarm)
    r["times"].append(o["elapsed_s"])
    r["over"] += o["elapsed_s"] > o["budget_s"]
(out / "runs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in runs))
print("| scenario | runs | right target | right cause | false alarms | verdicts | time, s (min / median / max) | over budget |")
print("|---|---|---|---|---|---|---|---|")
for key in expect:
    if key not in rows:
        continue
    r = rows[key]
    t = sorted(r["times"])
    med = t[len(t) // 2] if len(t) % 2 else (t[len(t) // 2 - 1] + t[len(t) // 2]) / 2
    target = f'{r["target"]}/{r["runs"]}' if expect[key][1] else f'{r["target"]}/{r["runs"]} (nothing failed)'
    verdicts = ", ".join(f"{n} {v.upper()}" for v, n in sorted(r["verdicts"].items()))
    print(f'| {r["what"]} | {r["runs"]} | {target} | {r["cause"]}/{r["runs"]} | {r["false"]} | {verdicts} | '
          f'{t[0]:.0f} / {med:.0f} / {t[-1]:.0f} | {r["over"]} |')
EOF
log "table in $out/table.md"
cat "$out/table.md"
