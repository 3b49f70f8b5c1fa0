# shellcheck shell=bash
# Variables cross the boundary both ways (repo and sweep come from the sourcing script; prefix, version
# and the rest are set here for it), which shellcheck cannot see from this file alone.
# shellcheck disable=SC2034,SC2154
# What the container tests share, sourced by run.sh and overlay.sh: messages, the Docker engine (started
# when it does not answer), the binary, the image (a base made from the binary's libraries, then
# k8s/Containerfile target "prebuilt"), and the teardown of everything labelled with this run's id.
#
# The sourcing script sets `repo` (the repository root) and LOG_TAG (the prefix of its messages) before
# sourcing; after it, it may define teardown_extra (called by the teardown once this run's containers,
# networks and images are gone, before an engine started here is stopped), and calls prepare_run, which
# sets the names below and installs the traps.

log() { printf '%s: %s\n' "$LOG_TAG" "$*" >&2; }
die() {
  log "FAIL: $*"
  exit 1
}
hex() { od -An -N"$1" -tx1 /dev/urandom | tr -d ' \n'; }

# skip_or_fail MESSAGE: what this machine cannot do; a skip (77) outside CI, a failure under CI=true.
skip_or_fail() {
  if [ "${CI:-}" = true ]; then die "$*"; fi
  log "SKIP: $*"
  exit 77
}

teardown_extra() { :; }

# prepare_run PREFIX_STEM: names unique to this run, and a label on everything it creates, for the
# teardown; the temporary folder; the traps.
prepare_run() {
  run_id=$(hex 4)
  prefix=$1-$run_id
  label=org.collbench.test-run=$run_id
  img=collbench-test:$run_id
  base_img=collbench-test-base:$run_id
  engine_started=""
  dockerd_pid=""
  build_pid=""
  bg_pids=()
  work=$(mktemp -d "${TMPDIR:-/tmp}/collbench-containers.XXXXXX")
  trap cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP
}

# ---- teardown ---------------------------------------------------------------------------------------

stop_engine() {
  case $engine_started in
    service) service docker stop >/dev/null 2>&1 || true ;;
    dockerd)
      kill "$dockerd_pid" 2>/dev/null || true
      for ((t = 0; t < 100; t++)); do
        kill -0 "$dockerd_pid" 2>/dev/null || break
        sleep 0.2
      done
      ;;
  esac
}

# remove_ours: every container, network and image of this run (all carry its label; the test image
# goes before its base, which cannot go while it has a child; removing the test image also removes
# the classic builder's untagged steps under it).
remove_ours() {
  docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1
  docker network ls -q --filter "label=$label" | xargs -r docker network rm >/dev/null 2>&1
  docker images -q --filter "label=$label" --filter "reference=$img" | xargs -r docker rmi -f >/dev/null 2>&1
  docker images -q --filter "label=$label" | xargs -r docker rmi -f >/dev/null 2>&1
}

# left_ours: how many Docker objects with this run's label are still there.
left_ours() {
  (docker ps -aq --filter "label=$label"
    docker network ls -q --filter "label=$label"
    docker images -aq --filter "label=$label") 2>/dev/null | wc -l
}

cleanup() {
  local rc=$? pid left t
  set +e
  trap - EXIT INT TERM HUP
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null; done
  # A build runs in a session of its own, so a Ctrl-C does not cut it short: the engine would go on
  # to commit a step nobody removes. Let it finish (seconds), then remove what it made.
  if [ -n "$build_pid" ]; then
    for ((t = 0; t < 300; t++)); do
      kill -0 "$build_pid" 2>/dev/null || break
      sleep 0.2
    done
  fi
  if docker info >/dev/null 2>&1; then
    remove_ours
    if [ "$rc" != 0 ]; then
      # Interrupted: a `docker run -d` cut short may create its container a moment later.
      sleep 1
      remove_ours
    fi
    teardown_extra || { [ "$rc" = 0 ] && rc=1; }
    left=$(left_ours)
    if [ "$left" != 0 ]; then
      log "teardown left $left Docker objects labelled $label behind"
      [ "$rc" = 0 ] && rc=1
    fi
  fi
  [ -n "$work" ] && rm -rf "$work"
  stop_engine
  exit "$rc"
}

# ---- the engine -------------------------------------------------------------------------------------

no_engine() { skip_or_fail "$@"; }

ensure_engine() {
  command -v docker >/dev/null || no_engine "no docker client (Debian: apt-get install docker.io)"
  docker info >/dev/null 2>&1 && return
  [ "$(id -u)" = 0 ] || no_engine "the Docker engine does not answer (docker info), and only root may start it"
  log "the Docker engine does not answer; starting it"
  if command -v service >/dev/null && [ -x /etc/init.d/docker ]; then
    service docker start >/dev/null 2>&1 && engine_started=service
  fi
  if [ -z "$engine_started" ]; then
    command -v dockerd >/dev/null || no_engine "no dockerd to start (Debian: apt-get install docker.io)"
    dockerd >"$work/dockerd.log" 2>&1 &
    dockerd_pid=$!
    engine_started=dockerd
  fi
  for ((t = 0; t < 60; t++)); do
    docker info >/dev/null 2>&1 && return
    sleep 1
  done
  [ -f "$work/dockerd.log" ] && tail -n 20 "$work/dockerd.log" >&2
  no_engine "the Docker engine did not answer within 60 s of starting it ($engine_started)"
}

# The collectives the sweep (array `sweep`) asks for (collbench's default when --collective is absent;
# "all": any).
sweep_collectives() {
  local i
  for ((i = 0; i < ${#sweep[@]}; i++)); do
    case ${sweep[i]} in
      --collective) echo "${sweep[i + 1]}" && return ;;
      --collective=*) echo "${sweep[i]#*=}" && return ;;
    esac
  done
  echo all_reduce,all_gather
}

# ---- the binary and the image -----------------------------------------------------------------------

# prepare_binary: `bin` = a copy of $COLLBENCH (or of a fresh `cargo build --release`) in the temporary
# folder, so every side runs the same bytes even if a build replaces the file meanwhile (the default
# and the --features mpi builds share target/release/collbench); `version` = its --version.
prepare_binary() {
  if [ -n "${COLLBENCH:-}" ]; then
    bin=$COLLBENCH
    [ -x "$bin" ] || die "COLLBENCH=$bin is not an executable file"
  else
    bin=$repo/target/release/collbench
    log "cargo build --release"
    cargo build --release --quiet || die "cargo build --release failed"
  fi
  install -m 0755 "$bin" "$work/collbench"
  bin=$work/collbench
  version=$("$bin" --version)
}

# build_image BUILD_LOG: the base (`base_img`) and the test image (`img`); sets t_base_s and t_build_s.
build_image() {
  local build_log=$1 t0 t1 base libs=() line lib ctx
  # The base: what the binary links, found by ldd, at the paths ldd names (the loader at the
  # interpreter path compiled into the binary), and the few /etc files glibc reads. Docker mounts
  # /etc/hosts, /etc/resolv.conf and /etc/hostname into every container itself.
  t0=$SECONDS
  base=$work/base
  mkdir -p "$base/etc" "$base/tmp"
  chmod 1777 "$base/tmp"
  while read -r line; do
    case $line in
      *"=> not found"*) die "ldd: $bin needs a library this machine lacks: $line" ;;
      *"=> /"*) lib=${line#*=> } ;;
      /*) lib=$line ;;
      *) continue ;; # linux-vdso (from the kernel), "statically linked", "not a dynamic executable"
    esac
    lib=${lib%% (*}
    mkdir -p "$base$(dirname "$lib")"
    cp -L "$lib" "$base$lib"
    libs+=("$lib")
  done < <(ldd "$bin" 2>&1 || true)
  printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' 'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$base/etc/passwd"
  printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$base/etc/group"
  printf '%s\n' 'passwd: files' 'group: files' 'hosts: files dns' >"$base/etc/nsswitch.conf"
  tar --numeric-owner --owner=0 --group=0 -C "$base" -cf - . |
    docker import --change "LABEL $label" - "$base_img" >/dev/null || die "docker import of the base failed"
  log "base $base_img: ${libs[*]:-no libraries (static binary)}"

  # The image, from the repository's build file: the context is the root to lay over the base.
  ctx=$work/context
  install -D -m 0755 "$bin" "$ctx/usr/local/bin/collbench"
  t1=$SECONDS
  setsid docker build --force-rm -f "$repo/k8s/Containerfile" --target prebuilt --build-arg "PREBUILT_BASE=$base_img" \
    --label "$label" -t "$img" "$ctx" >"$build_log" 2>&1 &
  build_pid=$!
  if ! wait "$build_pid"; then
    tail -n 30 "$build_log" >&2
    die "docker build -f k8s/Containerfile --target prebuilt failed (log: $build_log)"
  fi
  build_pid=""
  t_base_s=$((t1 - t0))
  t_build_s=$((SECONDS - t1))
  log "image $img built from k8s/Containerfile (target prebuilt) in $t_build_s s; base made in $t_base_s s"
}
