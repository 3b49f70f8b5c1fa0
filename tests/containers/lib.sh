# shellcheck shell=bash
# Variables cross the boundary both ways (repo and sweep come from the sourcing script; prefix, version
# and the rest are set here for it), which shellcheck cannot see from this file alone.
# shellcheck disable=SC2034,SC2154
# What the container tests share, sourced by run.sh and overlay.sh: messages, the Docker engine (started
# when it does not answer), the binary, the image (k8s/Containerfile's default target on a Debian 12
# base made here with mmdebstrap), and the teardown of everything labelled with this run's id.
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
  engine_started=""
  dockerd_pid=""
  build_pid=""
  build_log_path=""
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

# remove_ours: every container and network of this run (all carry its label), and its tag of the image
# (the image itself stays under its cache tag, for the next run on the same tree; see prepare_image).
remove_ours() {
  docker ps -aq --filter "label=$label" | xargs -r docker rm -f >/dev/null 2>&1
  docker network ls -q --filter "label=$label" | xargs -r docker network rm >/dev/null 2>&1
  docker image inspect "$img" >/dev/null 2>&1 && docker rmi "$img" >/dev/null 2>&1
  return 0
}

# left_ours: how many Docker objects of this run are still there.
left_ours() {
  (docker ps -aq --filter "label=$label"
    docker network ls -q --filter "label=$label"
    docker images -q "$img") 2>/dev/null | wc -l
}

cleanup() {
  local rc=$? pid left t
  set +e
  trap - EXIT INT TERM HUP
  for pid in "${bg_pids[@]}"; do kill "$pid" 2>/dev/null; done
  for pid in "${bg_pids[@]}"; do wait "$pid" 2>/dev/null; done
  # A build runs in a session of its own, so a Ctrl-C does not cut a step short. Let it finish (about a
  # minute with PREBUILT); one still running after that (a compile) is stopped: the engine cancels a
  # build whose client goes away, and the steps it finished stay as untagged images (docker image prune).
  if [ -n "$build_pid" ]; then
    for ((t = 0; t < 600; t++)); do
      kill -0 "$build_pid" 2>/dev/null || break
      sleep 0.2
    done
    kill "$build_pid" 2>/dev/null && wait "$build_pid" 2>/dev/null
    for ((t = 0; t < 60; t++)); do
      docker info >/dev/null 2>&1 || break
      remove_build_leftovers "$build_log_path" && break
      sleep 1
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

# ---- the Debian base --------------------------------------------------------------------------------

# Debian 12, as k8s/Containerfile wants for both stages: bookworm with its updates and security suites
# (the Rust toolchain the build stage installs, cargo-web, comes from bookworm-security).
DEBIAN_SUITE=bookworm
# Bump when the recipe below changes in a way its text does not show.
DEBIAN_RECIPE=1

# ensure_debian_base: `debian_img` = a local Debian 12 image, made from Debian's packages with mmdebstrap
# (variant minbase: the essential packages and apt) and imported, once per machine. Its name carries a
# key of the recipe (suite, mirrors, variant), so a changed recipe makes a new one and a later run on
# the same machine finds it; no run removes it. Runs on one machine take turns making it (a lock).
# Sets t_base_s (0 when it was there).
ensure_debian_base() {
  local mirror security sources key lockfd t0=$SECONDS
  mirror=${COLLBENCH_DEBIAN_MIRROR:-http://deb.debian.org/debian}
  security=${COLLBENCH_DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
  sources=("deb $mirror $DEBIAN_SUITE main" "deb $mirror $DEBIAN_SUITE-updates main"
    "deb $security $DEBIAN_SUITE-security main")
  key=$(printf '%s\n' "$DEBIAN_RECIPE" minbase "${sources[@]}" | sha256sum | cut -c1-16)
  debian_img=collbench-test-debian:$DEBIAN_SUITE-$key
  exec {lockfd}>"${TMPDIR:-/tmp}/collbench-containers-debian.lock"
  flock -w 1200 "$lockfd" || die "another run has been making the Debian base for 20 minutes (lock ${TMPDIR:-/tmp}/collbench-containers-debian.lock)"
  if ! docker image inspect "$debian_img" >/dev/null 2>&1; then
    command -v mmdebstrap >/dev/null ||
      skip_or_fail "no mmdebstrap to make the Debian base image $debian_img (Debian: apt-get install mmdebstrap)"
    log "making the Debian base $debian_img with mmdebstrap (once per machine; log: $work/mmdebstrap.log)"
    if ! mmdebstrap --variant=minbase --format=tar "$DEBIAN_SUITE" "$work/debian.tar" "${sources[@]}" \
      >"$work/mmdebstrap.log" 2>&1; then
      tail -n 20 "$work/mmdebstrap.log" >&2
      die "mmdebstrap could not make the Debian base from ${sources[*]}"
    fi
    docker import --change "LABEL org.collbench.test-base=$key" --change 'CMD ["bash"]' \
      "$work/debian.tar" "$debian_img" >/dev/null || die "docker import of the Debian base failed"
    rm -f "$work/debian.tar"
  fi
  exec {lockfd}>&-
  t_base_s=$((SECONDS - t0))
}

# ---- the binary and the image -----------------------------------------------------------------------

# The features the image is built with: every one that builds without the hardware, as k8s/Containerfile.
FEATURES="mpi rdma cuda"

# compile_in_image: whether the build stage compiles collbench (COLLBENCH_CONTAINERS_COMPILE=1), rather
# than taking the binary the suite built (the default; tests/containers/README.md says why).
compile_in_image() { [ "${COLLBENCH_CONTAINERS_COMPILE:-0}" = 1 ]; }

# prepare_binary: `bin` = a copy of $COLLBENCH (or of a fresh `cargo build --release --features
# "$FEATURES"`) in the temporary folder, so every side runs the same bytes even if a build replaces the
# file meanwhile; `version` = its --version. Not called when the image compiles collbench: the
# binary then comes out of the image (prepare_image).
prepare_binary() {
  if [ -n "${COLLBENCH:-}" ]; then
    bin=$COLLBENCH
    [ -x "$bin" ] || die "COLLBENCH=$bin is not an executable file"
  else
    bin=${CARGO_TARGET_DIR:-$repo/target}/release/collbench
    log "cargo build --release --features \"$FEATURES\""
    cargo build --release --locked --quiet --features "$FEATURES" ||
      die "cargo build --release --features \"$FEATURES\" failed"
  fi
  install -m 0755 "$bin" "$work/collbench"
  bin=$work/collbench
  version=$("$bin" --version)
}

# context_tar FILE [EXTRA_DIR]: the build context as a tar: the repository's files as git knows them
# (tracked and untracked, not ignored: no target/, no .git; the .dockerignore applies on top), as they are
# in the working tree, and EXTRA_DIR's files laid over them. Owners and times are fixed (the time 0), so
# the same content gives the same tar: the image's cache key.
context_tar() {
  local file=$1 extra=${2:-} f
  if git -C "$repo" rev-parse --show-toplevel >/dev/null 2>&1; then
    git -C "$repo" ls-files -z --cached --others --exclude-standard |
      while IFS= read -r -d '' f; do [ -f "$repo/$f" ] && printf '%s\0' "$f"; done |
      sort -zu >"$work/context.list"
    tar --null --no-recursion --sort=name --mtime=@0 --numeric-owner --owner=0 --group=0 -C "$repo" -T "$work/context.list" -cf "$file"
  else
    tar --sort=name --mtime=@0 --numeric-owner --owner=0 --group=0 --exclude=./target --exclude=./.git --exclude=./results \
      -C "$repo" -cf "$file" .
  fi
  if [ -n "$extra" ]; then
    tar --sort=name --mtime=@0 --numeric-owner --owner=0 --group=0 -C "$extra" -rf "$file" .
  fi
}

# remove_build_leftovers BUILD_LOG: the classic builder keeps the steps of stages the result does not
# start from (the build stage) as untagged images, of no use once the result is tagged, and those of a
# build cut short. Their ids are in its log. Tagged ones (the bases) are kept; parents of a tagged image
# refuse removal, as they should.
# Fails when some are left: the result's parents, or (in the teardown) the steps a cancelled build's
# container holds until the engine has removed it.
remove_build_leftovers() {
  local cid ids left=0
  mapfile -t ids < <(sed -n 's/^ ---> \([0-9a-f]\{12\}\)$/\1/p' "$1" 2>/dev/null | sort -u)
  for cid in "${ids[@]}"; do
    [ "$(docker image inspect -f '{{len .RepoTags}}' "$cid" 2>/dev/null)" = 0 ] || continue
    docker rmi "$cid" >/dev/null 2>&1 || left=1
  done
  return "$left"
}

# prepare_image BUILD_LOG: the image this run uses, `img`, built from k8s/Containerfile's default target
# (runtime) on the Debian base, with the repository as the build context; sets bin and version (see
# prepare_binary), t_base_s and t_build_s.
# By default the build stage takes the suite's binary (built with the same features, on this Debian
# release; --build-arg PREBUILT); with COLLBENCH_CONTAINERS_COMPILE=1 it compiles collbench and the bare
# side runs the binary copied out of the image. The image is kept between runs under a key of the
# context and the build arguments (collbench-test-image:KEY): run.sh and overlay.sh on the same tree
# build it once; a new key's build removes the other keys' tags. This run's own tag is `img`.
prepare_image() {
  local build_log=$1 key cache args=() t1 extra="" cid
  ensure_debian_base
  args=(--build-arg "BUILD_BASE=$debian_img" --build-arg "RUNTIME_BASE=$debian_img" --build-arg "FEATURES=$FEATURES")
  if ! compile_in_image; then
    prepare_binary
    extra=$work/context-extra
    install -D -m 0755 "$bin" "$extra/.prebuilt/collbench"
    args+=(--build-arg PREBUILT=.prebuilt/collbench)
  elif [ -f /etc/ssl/certs/ca-certificates.crt ]; then
    # The build fetches crates.io over this host's network: it trusts what cargo here trusts (a
    # TLS-intercepting proxy's CA included).
    extra=$work/context-extra
    install -D -m 0644 /etc/ssl/certs/ca-certificates.crt "$extra/.build/ca-certificates.crt"
    args+=(--build-arg CARGO_HTTP_CAINFO=/src/.build/ca-certificates.crt)
  fi
  t1=$SECONDS
  context_tar "$work/context.tar" "$extra"
  key=$( (sha256sum <"$work/context.tar"
    printf '%s\n' "${args[@]}" "$(docker image inspect -f '{{.Id}}' "$debian_img")") | sha256sum | cut -c1-16)
  cache=collbench-test-image:$key
  if docker image inspect "$cache" >/dev/null 2>&1; then
    log "image $cache: built before from this tree and these arguments; used as it is"
  else
    log "docker build -f k8s/Containerfile (default target)$(compile_in_image && echo ", compiling collbench" || echo ", the suite's binary as PREBUILT") (log: $build_log)"
    # Tagged for this run too from the start: another tree's run may untag the cache tag at any time.
    build_log_path=$build_log
    setsid docker build --force-rm -f k8s/Containerfile "${args[@]}" -t "$cache" -t "$img" - <"$work/context.tar" \
      >"$build_log" 2>&1 &
    build_pid=$!
    if ! wait "$build_pid"; then
      build_pid=""
      tail -n 30 "$build_log" >&2
      die "docker build -f k8s/Containerfile failed (log: $build_log)"
    fi
    build_pid=""
    remove_build_leftovers "$build_log" || true # the result's parents stay, as they should
    # Older keys' images: untagged (removed with their layers unless a running test still holds them).
    docker images --format '{{.Repository}}:{{.Tag}}' collbench-test-image | grep -vxF "$cache" |
      xargs -r docker rmi >/dev/null 2>&1 || true
  fi
  docker image inspect "$img" >/dev/null 2>&1 || docker tag "$cache" "$img" || die "docker tag $cache $img failed"
  t_build_s=$((SECONDS - t1))
  if compile_in_image; then
    cid=$(docker create --label "$label" "$img") || die "docker create $img failed"
    docker cp "$cid:/usr/local/bin/collbench" "$work/collbench" || die "docker cp of the image's collbench failed"
    docker rm "$cid" >/dev/null
    bin=$work/collbench
    if ldd "$bin" | grep -F 'not found' >&2; then
      die "the image's collbench cannot run on this host for the bare side: it lacks the libraries above"
    fi
    version=$("$bin" --version)
  fi
  log "image $img (= $cache) from k8s/Containerfile in $t_build_s s; Debian base $debian_img ($t_base_s s)"
  check_image
}

# check_image: the image's collbench links only what its runtime packages provide, and was built with
# every feature of FEATURES. A feature is seen by what collbench says when asked for it without the
# hardware: a build without the feature says "built without ..." (and how to rebuild); with it,
# collbench tries and fails for the hardware's sake (exit 2, a message that names what is missing).
check_image() {
  local out f name rc line missing=() linked
  # shellcheck disable=SC2016 # expanded in the container
  out=$(docker run --rm --pull never --network none --label "$label" "$img" sh -c '
    collbench --version
    ldd /usr/local/bin/collbench | sed "s/^/ldd /"
    for probe in "mpi run --transport mpi -T 5" "rdma run --transport rdma@collbench-probe -T 5" "cuda selftest --gpu"; do
      set -- $probe; name=$1; shift
      said=$(collbench "$@" 2>&1 </dev/null); rc=$?
      echo "probe $name $rc $(printf "%s" "$said" | tr "\n" " ")"
    done
    for a in all_reduce_perf all_gather_perf reduce_scatter_perf broadcast_perf reduce_perf alltoall_perf sendrecv_perf; do
      echo "alias $a $(readlink -f "$(command -v "$a")")"
    done
    echo "alias-run $(all_reduce_perf -b 8 -e 8 -n 1 -w 0 2>/dev/null | grep -c "^# Out of bounds values : 0 OK")"') ||
    die "the image's collbench could not be asked: $out"
  printf '%s\n' "$out" >"$work/image-check.txt"
  image_version=$(head -n 1 <<<"$out")
  [ "$image_version" = "$version" ] || die "the image's collbench says '$image_version', the binary beside it '$version'"
  if grep -E '^ldd.*not found' <<<"$out" >&2; then die "the image lacks libraries its collbench links (above)"; fi
  linked=$(sed -n 's/^ldd[[:space:]]*\(lib[a-z0-9_]*\)\.so.*/\1/p' <<<"$out" | grep -E '^lib(mpi|ibverbs|rdmacm)$' | sort -u | paste -sd ' ' -)
  features=()
  for f in $FEATURES; do
    line=$(grep "^probe $f " <<<"$out") || die "no answer to the $f probe in the image"
    read -r _ name rc _ <<<"$line"
    if [ "$rc" = 2 ] && ! grep -qi 'built without' <<<"$line"; then
      features+=("$f")
    else
      missing+=("$f (exit $rc: ${line#probe "$f" "$rc" })")
    fi
  done
  [ ${#missing[@]} = 0 ] || die "the image's collbench lacks features: $(printf '%s; ' "${missing[@]}")"
  # The nccl-tests names (collbench install-aliases in k8s/Containerfile) lead to the image's collbench, and
  # all_reduce_perf runs as nccl-tests does, its table closed by nccl-tests' line.
  local aliases
  aliases=$(grep -c '^alias [a-z_]*_perf /usr/local/bin/collbench$' <<<"$out" || true)
  [ "$aliases" = 7 ] || die "the image has $aliases of the 7 nccl-tests names leading to collbench: $(grep '^alias ' <<<"$out" | tr '\n' ';')"
  grep -qx 'alias-run 1' <<<"$out" || die "all_reduce_perf in the image did not end its table with '# Out of bounds values : 0 OK': $(grep '^alias-run' <<<"$out")"
  log "image's collbench: $image_version, features ${features[*]}, links ${linked:-none of libmpi, libibverbs, librdmacm}, nothing missing, the 7 nccl-tests names"
}
