#!/usr/bin/env bash
# The CNI-change gate: runs the preflight Job of this overlay and exits with its verdict, so a rollout
# pipeline can stop (or roll back) on a regressed network.
#
# Usage: k8s/overlays/preflight-gate/gate.sh [TIMEOUT_SECONDS]    (default 1800)
# Needs: kubectl with access to the cluster; the ConfigMap collbench-baseline and the Secret
#        collbench-job-token (see job.yaml). Environment: KUBECTL (default: kubectl), NAMESPACE.
# Output: rank 0's verdict line (`Preflight verdict: FAIL: 2 of 9 checks failed (...)`), then the
#         Job's state and the command that prints rank 0's whole log (the table of checks, the JSON).
# Exit status: 0 the preflight passed on every node; 1 it failed (a regression, a failed expectation,
#              a peer failure: the verdict line above says which); 2 the Job did not finish in time or
#              could not be started.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
timeout=${1:-1800}
k=("${KUBECTL:-kubectl}")
[ -z "${NAMESPACE:-}" ] || k+=(--namespace "$NAMESPACE")
job=collbench-preflight

for need in configmap/collbench-baseline secret/collbench-job-token; do
    "${k[@]}" get "$need" >/dev/null || { echo "gate.sh: $need is missing; make it as job.yaml says" >&2; exit 2; }
done
# A Job's pod template cannot change in place, and a finished one would answer at once: start afresh.
"${k[@]}" delete job "$job" --ignore-not-found --wait=true >/dev/null
"${k[@]}" apply -k "$here" || exit 2

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
echo "gate.sh: job/$job $state (every check, and the JSON: ${k[*]} logs -l $rank0 --tail=-1)"
[ "$state" = Complete ]
