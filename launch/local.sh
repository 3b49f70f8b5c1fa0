#!/usr/bin/env bash
# Run collbench's embedded launcher: N local ranks on this machine over loopback TCP.
# Usage: launch/local.sh [NP] [collbench run flags...]   e.g. launch/local.sh 8 -e 1G --collective all
set -euo pipefail
np=${1:-4}
[ $# -gt 0 ] && shift
bin=${COLLBENCH:-collbench}
command -v "$bin" >/dev/null 2>&1 || bin="$(dirname "$0")/../target/release/collbench"
exec "$bin" run --np "$np" "$@"
