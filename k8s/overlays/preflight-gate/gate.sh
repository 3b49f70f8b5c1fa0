#!/usr/bin/env bash
# The CNI-change gate: runs the preflight Job of this overlay and exits with its verdict, so a rollout
# pipeline can stop (or roll back) on a regressed network; and, before the change, records the baseline
# it compares with.
#
# Usage: k8s/overlays/preflight-gate/gate.sh [--record-baseline] [TIMEOUT_SECONDS]    (default 1800)
#   (no option)        the gate: the preflight on every node against the ConfigMap collbench-baseline
#   --record-baseline  the preflight of the healthy network (overlays/preflight-baseline), against
#                      nothing; rank 0's results are stored as the ConfigMap collbench-baseline (made,
#                      or replaced), where the gate reads them. Nothing is stored when it fails.
# Needs: kubectl with access to the cluster; the Secret collbench-job-token (see job.yaml), and for the
#        gate the ConfigMap. Environment: KUBECTL (default: kubectl), NAMESPACE.
# Output: rank 0's verdict line (`Preflight verdict: FAIL: 2 of 9 checks failed (...)`), then one line:
#         the Job's state and the command that prints rank 0's whole log (the table of checks, the JSON),
#         or what was recorded.
# Exit status: 0 the preflight passed on every node (and, recording, the baseline is stored); 1 it failed
#              (a regression, a failed expectation, a peer failure: the verdict line above says which);
#              2 the Job did not finish in time, could not be started, or its results could not be stored.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
record=false
if [ "${1:-}" = --record-baseline ]; then
    record=true
    shift
fi
case "${1:-1800}" in
    '' | *[!0-9]*) echo "gate.sh: usage: gate.sh [--record-baseline] [TIMEOUT_SECONDS]" >&2; exit 2 ;;
esac
timeout=${1:-1800}
k=("${KUBECTL:-kubectl}")
[ -z "${NAMESPACE:-}" ] || k+=(--namespace "$NAMESPACE")
job=collbench-preflight
configmap=collbench-baseline
overlay=$here
needs=(secret/collbench-job-token)
if $record; then
    overlay=$(cd "$here/../preflight-baseline" && pwd)
else
    needs+=("configmap/$configmap")
fi

for need in "${needs[@]}"; do
    "${k[@]}" get "$need" >/dev/null || { echo "gate.sh: $need is missing; make it as job.yaml says" >&2; exit 2; }
done
# A Job's pod template cannot change in place, and a finished one would answer at once: start afresh.
"${k[@]}" delete job "$job" --ignore-not-found --wait=true >/dev/null
"${k[@]}" apply -k "$overlay" || exit 2

deadline=$((SECONDS + timeout))
state=""
while [ -z "$state" ]; do
    conds=$("${k[@]}" get job "$job" -o jsonpath='{range .status.conditions[?(@.status=="True")]}{.type}{" "}{end}')
    case " $conds " in
        *" Complete "*) state=Complete ;;
        *" Failed "*) state=Failed ;;
    esac
    if [ -z "$state" ]; then
        [ "$SECONDS" -lt "$deadline" ] || { echo "gate.sh: job/$job did not finish in ${timeout} s" >&2; exit 2; }
        sleep 5 # polling the API server; the Job takes minutes
    fi
done
# Rank 0's verdict line, not its log: the log ends with the whole JSON document, which buries the verdict
# in a pipeline's output. Without a verdict (the preflight stopped before one: a peer, a deadline, bad
# input) the log's last lines before the JSON say why.
rank0="batch.kubernetes.io/job-completion-index=0,app.kubernetes.io/instance=$job"
log=$("${k[@]}" logs -l "$rank0" --tail=-1 2>&1) || true
human=$(printf '%s\n' "$log" | sed '/^----- BEGIN /,/^----- END /d')
verdict=$(printf '%s\n' "$human" | grep '^Preflight verdict: ' | tail -n 1) || true
if [ -n "$verdict" ]; then
    echo "$verdict"
else
    printf '%s\n' "$human" | tail -n 20
fi
if ! $record || [ "$state" != Complete ]; then
    what="every check, and the JSON: ${k[*]} logs -l $rank0 --tail=-1"
    $record && what="no baseline recorded; $what"
    echo "gate.sh: job/$job $state ($what)"
    [ "$state" = Complete ]
    exit
fi

# Recording: rank 0's results file, as its log holds it between the markers, becomes the ConfigMap.
json=$(mktemp)
trap 'rm -f "$json"' EXIT
printf '%s\n' "$log" | sed -n '/^----- BEGIN /,/^----- END /{//!p}' >"$json"
if ! printf '%s\n' "$log" | grep -q '^----- END ' || [ ! -s "$json" ]; then
    echo "gate.sh: rank 0's log holds no complete results file; no baseline recorded" >&2
    exit 2
fi
bytes=$(wc -c <"$json")
# A ConfigMap holds at most 1 MiB.
if [ "$bytes" -gt 1000000 ]; then
    echo "gate.sh: rank 0's results are $bytes bytes, more than a ConfigMap holds; no baseline recorded" >&2
    exit 2
fi
"${k[@]}" create configmap "$configmap" --from-file=baseline.json="$json" --dry-run=client -o yaml |
    "${k[@]}" apply -f - >/dev/null || { echo "gate.sh: storing configmap/$configmap failed" >&2; exit 2; }
echo "gate.sh: job/$job Complete; baseline recorded: configmap/$configmap ($bytes bytes, rank 0's results)"
