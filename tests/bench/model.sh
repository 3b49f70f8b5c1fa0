#!/usr/bin/env bash
# The alpha-beta model checked against the network: on namespace clusters (tests/netns/cluster.sh) whose
# hosts' eth0 egress is shaped to 1 Gbit/s (so the network, not the CPU, sets the cost), sweep all_reduce and
# all_gather with the ring and with the latency algorithms on 2, 3, 4 and 6 hosts (one rank per host), fit
# `collbench model` on the 2- and 3-host runs, predict 4 and 6 hosts and put the measured runs beside the
# predictions.
#
#   tests/bench/model.sh [OUT]        (root; OUT defaults to results/model-prediction)
#
# Writes OUT/run-H-ALGO.json (the sweeps, H hosts, ALGO ring or rd), OUT/predict-H.{txt,json,md} (fit on 2
# and 3 hosts, prediction at H with the measured times and errors). Nothing here asserts accuracy: the
# figures are recorded for the README.
#
# Environment:
#   COLLBENCH            the binary (default: target/release/collbench, built when COLLBENCH is not set)
#   COLLBENCH_BENCH_ARGS the sweep (default below)
#   MODEL_RATE           tc rate of every host's eth0 (default 1gbit)
#   MODEL_BURST          its tbf bucket (default cluster.sh's 256kb, which lets messages below it leave at veth
#                        speed; a few packets, such as 8kb, make the rate hold for medium sizes too)
#   MODEL_CC             the hosts' TCP congestion control (default: the machine's, which new namespaces
#                        inherit; the tcp-vs-mpi benchmarks set reno, see tests/bench/tcp-vs-mpi.sh)
#   MODEL_ALGOS          the `--algo` values swept at each host count (default "ring rd"; add rhd for recursive
#                        halving + doubling, which `--algo-model FILE` can then pick)
#   MODEL_FIT_HOSTS      host counts the model is fitted on (default "2 3")
#   MODEL_TARGETS        host counts it is checked on (default "4 6"); issue 53's check fits on "2 3 4" and
#                        checks "8 16" (into another OUT: the committed predict-4 and predict-6 are tested)
#   MODEL_REFIT_ONLY     1: measure nothing (no root needed), refit the run-H-ALGO.json already in OUT and
#                        write the predictions again, as after a change to the model
cd "$(dirname "$0")/../.." || exit
name=cbm$$
# shellcheck source=tests/bench/lib.sh
source tests/bench/lib.sh
out=${1:-$repo/results/model-prediction}
rate=${MODEL_RATE:-1gbit}
burst=${MODEL_BURST:-}
cc=${MODEL_CC:-}
read -r -a algos <<<"${MODEL_ALGOS:-ring rd}"
read -r -a fit_hosts <<<"${MODEL_FIT_HOSTS:-2 3}"
read -r -a targets <<<"${MODEL_TARGETS:-4 6}"
default_args="--collective all_reduce,all_gather -b 8 -e 16M -f 2 -n 5 -w 2 -c 1 -T 120"
read -r -a sweep <<<"${COLLBENCH_BENCH_ARGS:-$default_args}"

need_collbench
mkdir -p "$out"
if [[ ${MODEL_REFIT_ONLY:-0} != 1 ]]; then
  need_namespaces
  trap cleanup EXIT INT TERM
fi

# One sweep on $1 hosts with --algo $2, a rank in every host bootstrapped through RANK/WORLD_SIZE/MASTER_ADDR,
# rank 0 writing $out/run-$1-$2.json.
sweep_on() {
  local hosts=$1 algo=$2 file=$out/run-$1-$2.json
  rm -f "$file"
  run_ranks "$out" "$hosts" -J "$file" -- "${sweep[@]}" --algo "$algo" --transport tcp@eth0 --no-progress ||
    die "a rank failed on $hosts hosts, --algo $algo (logs in $out/rank*.err)"
  rm -f "$out"/rank*.out "$out"/rank*.err
  log "$hosts hosts, $algo: $file"
}

for hosts in "${fit_hosts[@]}" "${targets[@]}"; do
  [[ ${MODEL_REFIT_ONLY:-0} == 1 ]] && break
  log "$hosts hosts, eth0 egress shaped to $rate${burst:+ (burst $burst)}${cc:+, congestion control $cc}"
  cluster_up "$hosts" --rate "$rate" ${burst:+--burst "$burst"} ${cc:+--cc "$cc"}
  for algo in "${algos[@]}"; do
    sweep_on "$hosts" "$algo"
  done
  cluster_down
done

fit=()
for hosts in "${fit_hosts[@]}"; do
  for algo in "${algos[@]}"; do
    fit+=("$out/run-$hosts-$algo.json")
  done
done
for target in "${targets[@]}"; do
  measured=()
  for algo in "${algos[@]}"; do
    measured+=(--measured "$out/run-$target-$algo.json")
  done
  "$COLLBENCH" model "${fit[@]}" --target-ranks "$target" "${measured[@]}" \
    -J "$out/predict-$target.json" --markdown "$out/predict-$target.md" --force >"$out/predict-$target.txt"
  grep -A20 '^# measured at' "$out/predict-$target.txt" >&2 || true
done
log "wrote $out"
