#!/usr/bin/env bash
# pairwise and preflight with their defaults on a namespace cluster of HOSTS hosts (default 16), each host's
# eth0 shaped to RATE (default 100mbit), RUNS times (default 5) each on a clean cluster, with one link slowed
# to SLOW (default 20mbit, h5 -> h9, cluster.sh shape-pair) and with one host slowed to SLOW (h7's egress,
# cluster.sh shape). One line per run in results/scale/runs-HOSTSh.csv: command, case, run, exit status,
# seconds, budget, what it named, and the first-pass suspects measuring again did not confirm; a summary per
# command and case on stderr. KEEP=DIR keeps rank 0's stdout of every run there.
#
#   sudo bash tests/bench/scale.sh [HOSTS] [RUNS]
# COLLBENCH=path overrides the binary (else target/release/collbench, built). CASES (default "clean link
# host") and CMDS (default "pairwise preflight") choose what runs; PAIR (default "5 9") the slowed link's
# hosts; RATE= (empty) leaves the hosts unshaped; LABEL names the CSV runs-HOSTSh-LABEL.csv.
cd "$(dirname "$0")/../.." || exit
name=cbs$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
hosts=${1:-16}
runs=${2:-5}
rate=${RATE-100mbit}
slow=${SLOW:-20mbit}
cases=${CASES:-clean link host}
cmds=${CMDS:-pairwise preflight}
read -r pa pb <<<"${PAIR:-5 9}"
need_namespaces
need_collbench
trap cleanup EXIT
if [[ -n $rate ]]; then cluster_up "$hosts" --rate "$rate"; else cluster_up "$hosts"; fi
out=results/scale
mkdir -p "$out"
csv=$out/runs-${hosts}h${LABEL:+-$LABEL}.csv
work=$(mktemp -d)
echo "command,case,run,exit,seconds,budget_s,named,not_confirmed" >"$csv"
master=$(bash "$harness" addr "$name" 0 eth0)

# One run of `collbench CMD` with its defaults over eth0, one rank per host; appends its line to the CSV.
one() {
  local cmd=$1 case=$2 run=$3 h pids=() t0 t1 code named dismissed budget
  t0=$(date +%s.%N)
  for ((h = 0; h < hosts; h++)); do
    RANK=$h WORLD_SIZE=$hosts MASTER_ADDR=$master MASTER_PORT=29500 COLLBENCH_JOB_ID="$name" \
      bash "$harness" exec "$name" "$h" "$COLLBENCH" "$cmd" --transport tcp@eth0 \
      >"$work/rank$h.out" 2>"$work/rank$h.err" &
    pids+=($!)
  done
  code=0
  wait "${pids[0]}" || code=$?
  for h in "${pids[@]:1}"; do wait "$h" || true; done
  t1=$(date +%s.%N)
  # Every slow host or link rank 0 named (its finding lines start with SLOW), and apart from them the first-pass
  # suspects that measuring again did not confirm (printed indented, after "first pass:").
  named=$(grep -oE '^SLOW (HOST [^ :]+|LINK [^ ]+ <-> [^ :]+)' "$work/rank0.out" | sed "s/$name-//g" | sort -u |
    paste -sd ';' - || true)
  dismissed=$(grep -oE 'first pass: SLOW (HOST [^ :]+|LINK [^ ]+ <-> [^ :]+)' "$work/rank0.out" |
    sed "s/$name-//g; s/first pass: //" | sort -u | paste -sd ';' - || true)
  if [[ -n ${KEEP:-} ]]; then mkdir -p "$KEEP" && cp "$work/rank0.out" "$KEEP/$cmd-$case-$run.out"; fi
  if [[ $cmd == preflight ]]; then budget=180; else budget=120; fi
  echo "$cmd,$case,$run,$code,$(echo "$t1 - $t0" | bc),$budget,${named:-none},${dismissed:-none}" >>"$csv"
  log "$cmd $case run $run: exit $code in $(printf '%.0f' "$(echo "$t1 - $t0" | bc)") s, named ${named:-none}"
}

for case in $cases; do
  case $case in
    clean) ;;
    link) bash "$harness" shape-pair "$name" "$pa" "$pb" "$slow" ;;
    host)
      if [[ -n $rate ]]; then bash "$harness" shape "$name" "$pa" "$rate"; fi
      bash "$harness" shape "$name" 7 "$slow"
      ;;
  esac
  for cmd in $cmds; do
    for ((r = 1; r <= runs; r++)); do
      one "$cmd" "$case" "$r"
    done
  done
done
rm -rf "$work"
log "runs in $csv"
