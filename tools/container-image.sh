#!/usr/bin/env bash
# The project's container image, built and run with podman (rootful) on this Debian host:
# no Docker engine and no Docker Hub needed.
#
#   tools/container-image.sh [build] [--rebuild-base] [--fresh] [--tag NAME]   (make image)
#   tools/container-image.sh run [--name NAME] [--tree] [--host-calibration] [CMD...]
#                                 CMD (default: make test) in a container; --tree: on the
#                                 working tree (uncommitted changes too) instead of the image's
#                                 revision; --host-calibration: with this host's calibration
#                                 cache (used where the build matches: no 20-min calibration)
#   tools/container-image.sh name             the image's name for this revision
#   tools/container-image.sh remove PREFIX    containers named PREFIX*, running or not
#
# build: the Dockerfile, unchanged, on a Debian 12 base made here with debootstrap from
# the mirror apt already uses (imported as localhost/debian:12, which `FROM debian:12`
# resolves to, once; --rebuild-base makes it anew; --fresh makes it anew and uses no cached
# layer, as a new machine would: CI builds so). The build context is a clean clone of
# the commit checked out (uncommitted changes are not in the image), so the image is one
# revision and is tagged with it as well as :latest; earlier revisions' images are removed.
#
# What this host needs, in code rather than in memory:
#  - podman, runc and debootstrap, installed here when missing (PACKAGES below: not the
#    experiments' packages, so not in tools/apt-packages.txt);
#  - a containers.conf of our own (build/image/containers.conf, via CONTAINERS_CONF; the
#    host's configuration is left alone): the runtime runc (crun fails on hosts with
#    hybrid cgroups), cgroupfs (no systemd), and default ulimits no higher than podman's
#    own hard limits (its 1048576 needs CAP_SYS_RESOURCE);
#  - a proxy with its own CA (PIP_CERT or SSL_CERT_FILE names the bundle): the base gets
#    that bundle and an /etc/pip.conf pointing pip at the system bundle; proxy variables
#    (http_proxy, https_proxy, no_proxy, either case) are passed to the build.
#
# Root only (debootstrap, rootful podman). Takes no lock: a caller that shares the host's
# kernel with other emulated runs serialises `run` itself.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
PACKAGES=(podman runc debootstrap)
# shellcheck source=tools/own-packages.sh
source tools/own-packages.sh

IMAGE=${TCPEVAL_IMAGE:-localhost/tcpeval}
BASE=localhost/debian:12
SUITE=bookworm
WORK=$REPO/build/image
export CONTAINERS_CONF=$WORK/containers.conf

die() { echo "container-image: $*" >&2; exit 1; }
say() { echo "container-image: $*" >&2; }

[[ $(id -u) -eq 0 ]] || die "needs root (debootstrap, rootful podman); run it with sudo"

# Container ulimits no higher than podman's own hard limits: its defaults (1048576 files
# and processes) need CAP_SYS_RESOURCE, which a container host may withhold even from root,
# and podman 4.3 holds itself to 32768 processes whatever the shell allows.
hard() { local v; v=$(ulimit -H "$1"); [[ $v == unlimited || $v -gt $2 ]] && v=$2; echo "$v"; }
ULIMITS=("nofile=$(hard -n 1048576):$(hard -n 1048576)" "nproc=$(hard -u 32768):$(hard -u 32768)")

write_conf() {
  mkdir -p "$WORK"
  cat > "$CONTAINERS_CONF" <<EOF
# written by tools/container-image.sh; podman reads it through CONTAINERS_CONF
[containers]
default_ulimits = ["${ULIMITS[0]}", "${ULIMITS[1]}"]

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
}

revision() { git rev-parse --short=12 HEAD; }

# The host's Debian sources for SUITE (deb822 files or one-line entries), for the base.
host_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] && grep -qE "^Suites:.*\b$SUITE\b" "$f" && grep -qE "^URIs:.*/debian/?$" "$f" && cat "$f" && echo
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f $f ]] && grep -E "^deb\s+(\[[^]]*\]\s+)?\S+/debian(-security)?/?\s+$SUITE" "$f"
  done
  return 0
}

host_mirror() {
  local m
  m=$(host_sources | awk -v s="$SUITE" '
      /^URIs:/ { uri = $2 }
      /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == s && uri ~ /\/debian\/?$/) { print uri; exit } }
      /^deb[ \t]/ { for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { if ($(i + 1) == s) { print $i; exit } break } }')
  echo "${m:-http://deb.debian.org/debian}"
}

make_base() {
  local mirror root ca=${PIP_CERT:-${SSL_CERT_FILE:-}}
  mirror=$(host_mirror)
  root=$WORK/rootfs
  rm -rf "$root"
  say "debootstrap --variant=minbase $SUITE from $mirror"
  debootstrap --variant=minbase "$SUITE" "$root" "$mirror" > "$WORK/debootstrap.log" 2>&1 \
    || { tail -20 "$WORK/debootstrap.log" >&2; die "debootstrap failed (log: $WORK/debootstrap.log)"; }
  # the same Debian sources as the host (updates, security), when it names them
  local sources
  sources=$(host_sources)
  if [[ $sources == *URIs:* ]]; then
    rm -f "$root/etc/apt/sources.list"
    printf '%s\n' "$sources" > "$root/etc/apt/sources.list.d/debian.sources"
  elif [[ -n $sources ]]; then
    printf '%s\n' "$sources" > "$root/etc/apt/sources.list"
  fi
  if [[ -n $ca && -f $ca ]]; then
    # the host's CA bundle (a proxy's own CA among them): as the system bundle now, and
    # where update-ca-certificates keeps it if the image installs ca-certificates later
    say "base trusts the host's CA bundle $ca; pip uses the system bundle"
    mkdir -p "$root/etc/ssl/certs" "$root/usr/local/share/ca-certificates"
    cp "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
    cp "$ca" "$root/usr/local/share/ca-certificates/host-ca-bundle.crt"
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"
  fi
  # nothing of this host's identity or caches in the base
  rm -f "$root/etc/hostname" "$root/etc/resolv.conf"
  rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/var/cache/apt/archives/*.deb \
    "$root"/var/log/* "$root"/tmp/*
  podman rmi -f "$BASE" >/dev/null 2>&1 || true
  tar -C "$root" --numeric-owner -cf - . | podman import --quiet \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["bash"]' \
    --message "debootstrap --variant=minbase $SUITE $mirror" - "$BASE" >/dev/null
  rm -rf "$root"
  say "imported $BASE"
}

build() {
  local rebuild_base=0 tag= cache=--layers
  while (($#)); do
    case $1 in
      --rebuild-base) rebuild_base=1 ;;
      --fresh) rebuild_base=1 cache=--no-cache ;;
      --tag) tag=$2; shift ;;
      *) die "build: unknown option $1" ;;
    esac
    shift
  done
  install_own_packages
  write_conf
  if ((rebuild_base)) || ! podman image exists "$BASE"; then
    make_base
  fi
  local rev ctx
  rev=$(revision)
  [[ -z $(git status --porcelain --untracked-files=no) ]] \
    || say "warning: uncommitted changes are not in the image (it is built from $rev)"
  ctx=$WORK/context
  rm -rf "$ctx"
  git clone -q --no-checkout "$REPO" "$ctx"
  git -C "$ctx" checkout -q --detach "$(git rev-parse HEAD)"
  local args=(--pull=never --network host "$cache" -f "$ctx/Dockerfile"
              -t "$IMAGE:$rev" -t "$IMAGE:latest" --label "org.opencontainers.image.revision=$(git rev-parse HEAD)")
  [[ -n $tag ]] && args+=(-t "$tag")
  local v
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY; do
    [[ -n ${!v:-} ]] && args+=(--build-arg "$v=${!v}")
  done
  say "building $IMAGE:$rev (from $BASE)"
  podman build "${args[@]}" "$ctx"
  rm -rf "$ctx"
  # earlier revisions' images go: each can hold an environment of its own (3.3 GB)
  podman images --format '{{.Repository}}:{{.Tag}}' "$IMAGE" | grep -v -e ":$rev\$" -e ':latest$' \
    | xargs -r podman rmi >/dev/null || true
  podman image prune -f >/dev/null || true   # the layers no tag holds any more
  say "built $IMAGE:$rev and $IMAGE:latest, $(podman image inspect --format '{{.Size}}' "$IMAGE:$rev" | numfmt --to=si)B"
}

CPU_CGROUP=/sys/fs/cgroup/cpu

# A container whose process is gone: its podman run was killed (CI's time limit kills the
# job, not the container) or the machine was restored from a snapshot. Its cgroup still
# holds the real-time time it was given, all the root had, so no later container could
# start ("failed to write 950000: cpu.rt_runtime_us: invalid argument").
remove_dead_containers() {
  local name pid
  while read -r name pid; do
    [[ -n $name ]] || continue
    ((pid > 0)) && kill -0 "$pid" 2>/dev/null && continue
    say "removing container $name: its process is gone"
    podman rm -f -t 0 "$name" >/dev/null
  done < <(podman ps -a --filter name='^tcpeval-' --format '{{.Names}} {{.Pid}}')
  # podman rm leaves a dead container's cgroups behind; empty ones of containers podman no
  # longer knows are removed (rmdir refuses any that still holds a process)
  local dir id controller
  for dir in "$CPU_CGROUP"/libpod-*/; do
    [[ -d $dir ]] || continue
    id=${dir%/}; id=${id##*/libpod-}
    podman container exists "$id" && continue
    [[ -z $(find "$dir" -name tasks -exec cat {} +) ]] || continue
    say "removing the cgroups of container ${id:0:12}, gone ($(cat "$dir/cpu.rt_runtime_us") us of real-time time held)"
    for controller in /sys/fs/cgroup/*/libpod-"$id"; do find "$controller" -depth -type d -exec rmdir {} +; done
  done
}

# Every container whose name starts with PREFIX, running or not (CI: what a run killed at its
# time limit left behind), then the cgroups of dead ones
remove() {
  (($# == 1)) && [[ $1 == tcpeval-* ]] || die "remove takes one name prefix starting with tcpeval-"
  install_own_packages
  write_conf
  local name
  for name in $(podman ps -a --filter name="^$1" --format '{{.Names}}'); do
    say "removing container $name"
    podman rm -f -t 0 "$name" >/dev/null
  done
  remove_dead_containers
}

# The root's real-time time per period, less what its other child cgroups hold
rt_left() {
  local held=0 dir holders=()
  for dir in "$CPU_CGROUP"/*/; do
    local us; us=$(cat "$dir/cpu.rt_runtime_us")
    if ((us > 0)); then
      local id=${dir%/}; id=${id##*/libpod-}
      holders+=("$(podman ps -a --filter id="$id" --format '{{.Names}}' 2>/dev/null || true):${dir%/}")
      held=$((held + us))
    fi
  done
  local left=$(($(cat "$CPU_CGROUP/cpu.rt_runtime_us") - held))
  ((left > 0)) || die "no real-time time left for a container (the delay line needs it): held by ${holders[*]}"
  echo "$left"
}

# A privileged container on the host's network stack (the emulated backend's namespaces,
# BPF congestion controls and qdiscs live in the host kernel, as in a run on the host;
# host-global sysctls are only read), sharing /run/lock so that its runs and the host's
# take turns on the host lock, and the host's cgroups so that the keep-awake loops run in
# the root cpu group (src/tcpeval/backends/emulated/awake.py). Removed on exit, even when
# interrupted.
run() {
  install_own_packages
  write_conf
  local image=$IMAGE:$(revision)
  podman image exists "$image" || image=$IMAGE:latest
  podman image exists "$image" || die "no image $image: make image"
  NAME=tcpeval-$$   # global: the trap runs after this function has returned
  local extra=() tree=0 cache=${TCPEVAL_CACHE:-/var/cache/tcpeval}
  while (($#)); do
    case $1 in
      --name) NAME=$2; shift 2 ;;
      --host-calibration) mkdir -p "$cache"; extra+=(-v "$cache:/var/cache/tcpeval"); shift ;;
      --tree) tree=1; extra+=(-v "$REPO:/src:ro"); shift ;;
      *) break ;;
    esac
  done
  (($#)) || set -- make test
  # the working tree's tracked files, uncommitted changes included, over the image's clone
  ((tree)) && set -- bash -c '(cd /src && git ls-files -z | tar --null -T - -cf -) | tar -xf - && exec "$@"' \
    tree "$@"
  trap 'podman rm -f -t 0 "$NAME" >/dev/null 2>&1 || true' EXIT INT TERM
  remove_dead_containers
  local tty=() rt=()
  [[ -t 0 && -t 1 ]] && tty=(-it)
  # cgroup v1 with real-time group scheduling (this host): a new cgroup gets no real-time
  # time, and the delay line's SCHED_FIFO fails (EPERM); podman's parent cgroup has none to
  # give, so the container's cgroup hangs off the root with what the root has left
  [[ -f $CPU_CGROUP/cpu.rt_runtime_us ]] && rt=(--cgroup-parent=/ --cpu-rt-runtime="$(rt_left)")
  podman run --rm "${tty[@]}" "${rt[@]}" --name "$NAME" --privileged --network host \
    --cgroupns=host -v /sys/fs/cgroup:/sys/fs/cgroup -v /sys/kernel/btf:/sys/kernel/btf:ro \
    -v /run/lock:/run/lock "${extra[@]}" "$image" "$@"
}

cmd=${1:-build}
(($#)) && shift
case $cmd in
  build) build "$@" ;;
  run) run "$@" ;;
  name) echo "$IMAGE:$(revision)" ;;
  remove) remove "$@" ;;
  -h|--help|help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//' ;;
  --rebuild-base|--fresh|--tag) build "$cmd" "$@" ;;
  *) die "unknown command $cmd (build, run, name, remove)" ;;
esac
