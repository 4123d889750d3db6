#!/usr/bin/env bash
# Builds the desktop's Docker image without any container registry.
#
#   bash vm/build-image.sh            build (no-op when the image for this vm/ exists)
#   bash vm/build-image.sh --force    rebuild both layers
#   bash vm/build-image.sh --print-tag
#                                     print the image tag for this vm/ and exit
#
# Two layers, keyed separately so that editing the server only redoes the thin one:
#   control-osworld-base:<base hash>  debootstrapped bookworm + vm/packages.txt + user +
#                                     venv with vm/requirements.txt  (key: the normalised
#                                     package and requirement lists + BASE_RECIPE)
#   control-osworld-desktop:<vm hash> vm/Dockerfile on top: vm/ and the home skeleton
#                                     (key: every file under vm/). Also tagged :latest.
#
# The same script provisions a root filesystem from inside (`--provision DIR`), both in
# the debootstrapped chroot here and in vm/Dockerfile's RUN for users whose Docker can
# pull debian:bookworm, so the two ways of building install exactly the same things.
#
# Environment: CONTROL_OSWORLD_MIRROR (default http://deb.debian.org/debian),
# CONTROL_OSWORLD_SECURITY_MIRROR (default http://deb.debian.org/debian-security),
# CONTROL_OSWORLD_CACHE (default /var/cache/control-osworld: .deb files kept across
# builds), TMPDIR (work dir for the root filesystem; default /var/tmp).
set -euo pipefail

# Bump when the base recipe below changes in a way that must rebuild existing bases.
BASE_RECIPE=1
# Image-only extras on top of vm/packages.txt: tini is PID 1 (reaps the orphans that
# apps leave, forwards SIGTERM; this engine has no docker-init for --init).
EXTRA_PACKAGES="tini"
OSWORLD_ROOT=/opt/control-osworld
DESKTOP_REPO=control-osworld-desktop
BASE_REPO=control-osworld-base

log() { printf '[build-image %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# ---------------------------------------------------------------------------------------
# Lists and hashes (mirrored by control_osworld/desktop/docker.py:vm_hash; keep in step).

# Package names of vm/packages.txt without comments/blank lines, sorted, one a line.
package_list() { sed -e 's/#.*//' -e 's/[[:space:]]\+/\n/g' "$1" | sed '/^$/d' | LC_ALL=C sort -u; }
requirement_list() { sed -e 's/[[:space:]]#.*//' -e 's/^#.*//' -e 's/[[:space:]]*$//' "$1" | sed '/^$/d'; }

# Content hash of a folder: "<sha256> <x|-> <relative path>" per regular file (bytecode
# caches left out), sorted bytewise, hashed again; first 12 hex digits.
tree_hash() {
  (cd "$1" && find . -type f ! -path '*/__pycache__/*' ! -name '*.pyc' -printf '%P\0' |
    LC_ALL=C sort -z |
    while IFS= read -r -d '' f; do
      if (( 8#$(stat -c %a "$f") & 8#111 )); then x=x; else x=-; fi
      printf '%s %s %s\n' "$(sha256sum <"$f" | cut -c1-64)" "$x" "$f"
    done) | sha256sum | cut -c1-12
}

base_hash() {
  { echo "recipe $BASE_RECIPE"; echo "extra $EXTRA_PACKAGES"
    package_list "$1/packages.txt"; echo "--"; requirement_list "$1/requirements.txt"
  } | sha256sum | cut -c1-12
}

# ---------------------------------------------------------------------------------------
# --provision DIR: runs INSIDE the target root filesystem as root (chroot or Dockerfile
# RUN). DIR holds packages.txt, requirements.txt and this script.
provision() {
  local dir=$1 t0
  export DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8 LANG=C.UTF-8
  export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
  [ -f "$dir/packages.txt" ] || die "provision: $dir/packages.txt missing"
  [ -f "$dir/requirements.txt" ] || die "provision: $dir/requirements.txt missing"

  # Speed: no fsync per file (the image is written once, at the end, anyway), no docs,
  # man pages or translations (about 1/5 of the unpacked size), no recommends.
  mkdir -p /etc/dpkg/dpkg.cfg.d /etc/apt/apt.conf.d
  echo force-unsafe-io >/etc/dpkg/dpkg.cfg.d/control-osworld-unsafe-io
  cat >/etc/dpkg/dpkg.cfg.d/control-osworld-slim <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-include=/usr/share/locale/locale.alias
path-exclude=/usr/share/lintian/*
path-exclude=/usr/share/help/*
EOF
  cat >/etc/apt/apt.conf.d/control-osworld <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
Acquire::Retries "3";
EOF
  # Services must not start inside the build (dbus, cron): no init is running here.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d

  local wrap=()
  if command -v eatmydata >/dev/null; then wrap=(eatmydata); fi
  local pkgs
  pkgs=$(package_list "$dir/packages.txt" | tr '\n' ' ')

  t0=$(date +%s)
  log "provision: apt-get update"
  "${wrap[@]}" apt-get update -qq || die "provision: apt-get update failed (mirror reachable?)"
  log "provision: apt-get upgrade (security updates for the base system)"
  "${wrap[@]}" apt-get -y -q -o Dpkg::Use-Pty=0 upgrade >/tmp/apt-upgrade.log 2>&1 ||
    { tail -40 /tmp/apt-upgrade.log >&2; die "provision: apt-get upgrade failed (log above)"; }
  rm -f /tmp/apt-upgrade.log
  log "provision: installing $(wc -w <<<"$pkgs $EXTRA_PACKAGES") packages and their dependencies"
  # shellcheck disable=SC2086
  "${wrap[@]}" apt-get install -y -q -o Dpkg::Use-Pty=0 --no-install-recommends $pkgs $EXTRA_PACKAGES \
    >/tmp/apt-install.log 2>&1 || { tail -40 /tmp/apt-install.log >&2; die "provision: apt-get install of vm/packages.txt failed (log above)"; }
  grep -E '^[0-9]+ upgraded, [0-9]+ newly installed' /tmp/apt-install.log >&2 || true
  rm -f /tmp/apt-install.log
  log "provision: packages installed in $(( $(date +%s) - t0 ))s"

  t0=$(date +%s)
  # The desktop's user: uid 1000 in its own group, password `password` (OSWorld's tasks
  # use it, e.g. {CLIENT_PASSWORD}); no sudo.
  if ! getent group user >/dev/null; then groupadd -g 1000 user; fi
  if ! id -u user >/dev/null 2>&1; then
    useradd -m -u 1000 -g user -s /bin/bash -d /home/user user
  fi
  echo 'user:password' | chpasswd
  [ "$(id -u user)" = 1000 ] || die "provision: user 'user' exists with uid $(id -u user), need 1000"

  # The desktop's python: a venv over Debian's python3 so pyatspi/gi/PIL/tk come from
  # Debian and pyautogui & co. from PyPI.
  log "provision: venv $OSWORLD_ROOT/venv + pip install -r requirements.txt"
  python3 -m venv --system-site-packages "$OSWORLD_ROOT/venv" || die "provision: python3 -m venv failed"
  "$OSWORLD_ROOT/venv/bin/pip" install -q --no-cache-dir --disable-pip-version-check \
    -r "$dir/requirements.txt" || die "provision: pip install -r vm/requirements.txt failed (PyPI reachable?)"
  "$OSWORLD_ROOT/venv/bin/python" -c 'import Xlib, mss, pymsgbox, pyscreeze, pyatspi' \
    || die "provision: the venv cannot import the desktop's python modules"
  log "provision: user and venv in $(( $(date +%s) - t0 ))s"

  printf 'base=%s\n' "$(base_hash "$dir")" >"$OSWORLD_ROOT/.base-provisioned"
  # Clean: lists and caches are dead weight in the image.
  if [ -z "${CONTROL_OSWORLD_KEEP_DEBS:-}" ]; then apt-get clean; fi
  rm -rf /var/lib/apt/lists/* /var/cache/debconf/*-old /var/lib/dpkg/*-old /var/log/apt/* \
    /var/log/dpkg.log /var/log/alternatives.log /root/.cache /tmp/* 2>/dev/null || true
  rm -f /usr/sbin/policy-rc.d
  log "provision: done"
}

# ---------------------------------------------------------------------------------------
# Host side.

ROOTFS=""
cleanup() {
  local rc=$?
  if [ -n "$ROOTFS" ] && [ -d "$ROOTFS" ]; then
    # Processes a package script left running inside the chroot hold its mounts.
    local p
    for p in /proc/[0-9]*; do
      if [ "$(readlink "$p/root" 2>/dev/null)" = "$ROOTFS" ]; then kill -9 "${p#/proc/}" 2>/dev/null || true; fi
    done
    # Every mount below the root filesystem, deepest first (lazy: never blocks).
    awk -v r="$ROOTFS/" 'index($5, r) == 1 {print $5}' /proc/self/mountinfo | LC_ALL=C sort -r |
      while read -r m; do umount -l "$m" 2>/dev/null || log "WARNING: could not unmount $m"; done
    if awk -v r="$ROOTFS/" 'index($5, r) == 1 {f=1} END {exit !f}' /proc/self/mountinfo; then
      log "WARNING: mounts remain under $ROOTFS; not deleting it (unmount by hand, then rm -rf it)"
    else
      # --one-file-system: belt and braces against deleting through a leftover bind mount.
      rm -rf --one-file-system "$(dirname "$ROOTFS")"
    fi
  fi
  exit "$rc"
}

phase_t=0
phase() { phase_t=$(date +%s.%N); log "==> $*"; }
phase_done() { log "    $1 took $(awk -v a="$phase_t" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')s"; }

image_exists() { docker image inspect "$1" >/dev/null 2>&1; }

build_base() {
  local base_tag=$1 cache=$2 mirror=$3 secmirror=$4 suite=bookworm
  if ! command -v debootstrap >/dev/null; then
    log "installing debootstrap on the host (apt-get)"
    command -v apt-get >/dev/null || die "debootstrap is not installed and there is no apt-get to install it"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null ||
      { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null; } ||
      die "could not install debootstrap (apt-get install debootstrap)"
  fi
  mkdir -p "$cache/debs/partial"
  local work
  work=$(mktemp -d "${TMPDIR:-/var/tmp}/control-osworld-build.XXXXXX")
  ROOTFS="$work/rootfs"
  mkdir -p "$ROOTFS"
  trap cleanup EXIT
  trap 'exit 130' INT TERM

  # Reuse .deb files the host's own `apt-get install` left (same Debian, same versions);
  # hard links when on the same filesystem, else copies. Skips what the cache has.
  local n
  n=$(find /var/cache/apt/archives -maxdepth 1 -name '*.deb' 2>/dev/null | wc -l)
  if [ "$n" -gt 0 ]; then
    cp -nl /var/cache/apt/archives/*.deb "$cache/debs/" 2>/dev/null ||
      cp -n /var/cache/apt/archives/*.deb "$cache/debs/" || true
    log "reused $n .deb files from the host's apt cache"
  fi

  phase "debootstrap --variant=minbase $suite ($mirror)"
  debootstrap --variant=minbase --include=eatmydata,ca-certificates --cache-dir="$cache/debs" \
    "$suite" "$ROOTFS" "$mirror" >"$work/debootstrap.log" 2>&1 || {
    tail -30 "$work/debootstrap.log" >&2
    [ -f "$ROOTFS/debootstrap/debootstrap.log" ] && tail -30 "$ROOTFS/debootstrap/debootstrap.log" >&2
    die "debootstrap failed (log above)"; }
  phase_done debootstrap

  phase "provisioning inside the chroot (packages, user, venv)"
  cat >"$ROOTFS/etc/apt/sources.list" <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $secmirror $suite-security main
EOF
  cp -L /etc/resolv.conf "$ROOTFS/etc/resolv.conf"   # pip and apt resolve via the host's DNS
  mount -t proc proc "$ROOTFS/proc"
  mount --rbind /dev "$ROOTFS/dev" && mount --make-rslave "$ROOTFS/dev"
  mount --bind "$cache/debs" "$ROOTFS/var/cache/apt/archives"
  mkdir -p "$ROOTFS/tmp/provision"
  cp "$VM_DIR/packages.txt" "$VM_DIR/requirements.txt" "$SELF" "$ROOTFS/tmp/provision/"
  # pip inside the chroot must trust what the host trusts (e.g. a TLS-intercepting proxy's
  # CA) and use the host's proxy settings; both only for the build, not baked in.
  local envs=(CONTROL_OSWORLD_KEEP_DEBS=1 HOME=/root TERM=dumb) v ca=""
  for v in PIP_CERT REQUESTS_CA_BUNDLE SSL_CERT_FILE; do
    if [ -n "${!v:-}" ] && [ -f "${!v}" ]; then ca=${!v}; break; fi
  done
  if [ -z "$ca" ] && [ -f /etc/ssl/certs/ca-certificates.crt ]; then ca=/etc/ssl/certs/ca-certificates.crt; fi
  if [ -n "$ca" ]; then
    cp -L "$ca" "$ROOTFS/tmp/provision/host-ca.crt"
    envs+=(PIP_CERT=/tmp/provision/host-ca.crt)
  fi
  for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY PIP_INDEX_URL \
           PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_DEFAULT_TIMEOUT; do
    if [ -n "${!v:-}" ]; then envs+=("$v=${!v}"); fi
  done
  chroot "$ROOTFS" /usr/bin/env -i "${envs[@]}" \
    /bin/bash /tmp/provision/build-image.sh --provision /tmp/provision ||
    die "provisioning inside the chroot failed (see above)"
  umount -l "$ROOTFS/var/cache/apt/archives" "$ROOTFS/dev" "$ROOTFS/proc"
  rm -rf "${ROOTFS:?}/tmp/provision" "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin
  : >"$ROOTFS/etc/resolv.conf"    # docker mounts its own
  echo desktop >"$ROOTFS/etc/hostname"
  phase_done provisioning

  phase "docker import -> $base_tag ($(du -sh --one-file-system "$ROOTFS" | cut -f1) root filesystem)"
  tar -C "$ROOTFS" --numeric-owner -cf - --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' . |
    docker import --change "LABEL control-osworld.base-hash=$BASE_HASH" - "$base_tag" >/dev/null ||
    die "docker import of the root filesystem failed"
  phase_done "docker import"
  # Nothing is mounted below the work dir any more (checked): delete it while the thin
  # layer builds; main waits for it.
  if awk -v r="$ROOTFS/" 'index($5, r) == 1 {f=1} END {exit !f}' /proc/self/mountinfo; then
    :  # the EXIT trap unmounts and deletes it
  else
    rm -rf --one-file-system "$work" & RM_PID=$!
    ROOTFS=""; trap - EXIT
  fi
}

main() {
  local force=0 print_tag=0
  while [ $# -gt 0 ]; do
    case $1 in
      --provision) [ $# -ge 2 ] || die "--provision needs a folder"; provision "$2"; exit 0 ;;
      --force) force=1 ;;
      --print-tag) print_tag=1 ;;
      -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print; next} NR > 1 {exit}' "$SELF"; exit 0 ;;
      *) die "unknown argument $1 (see --help)" ;;
    esac
    shift
  done

  local vm_hash desktop_tag base_tag
  vm_hash=$(tree_hash "$VM_DIR")
  BASE_HASH=$(base_hash "$VM_DIR")
  desktop_tag="$DESKTOP_REPO:$vm_hash"
  base_tag="$BASE_REPO:$BASE_HASH"
  if [ "$print_tag" = 1 ]; then echo "$desktop_tag"; exit 0; fi

  [ "$(id -u)" = 0 ] || die "must run as root (debootstrap, chroot and mounts need it)"
  command -v docker >/dev/null || die "the docker CLI is not installed"
  docker info >/dev/null 2>&1 || die "cannot talk to the Docker engine (is dockerd running? are you allowed to use it?)"

  # One build at a time on this machine; a second caller waits and then finds the image.
  exec 9>/var/lock/control-osworld-build-image.lock
  if ! flock -n 9; then log "another build-image.sh is running; waiting for it"; flock 9; fi

  if [ "$force" = 0 ] && image_exists "$desktop_tag"; then
    docker tag "$desktop_tag" "$DESKTOP_REPO:latest"
    log "$desktop_tag exists (vm/ unchanged); tagged :latest; nothing to build"
    exit 0
  fi

  local t_start
  t_start=$(date +%s)
  if [ "$force" = 0 ] && image_exists "$base_tag"; then
    log "base $base_tag exists (packages.txt and requirements.txt unchanged); reusing it"
  else
    build_base "$base_tag" "${CONTROL_OSWORLD_CACHE:-/var/cache/control-osworld}" \
      "${CONTROL_OSWORLD_MIRROR:-http://deb.debian.org/debian}" \
      "${CONTROL_OSWORLD_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
  fi

  phase "docker build vm/Dockerfile on $base_tag -> $desktop_tag"
  # The legacy builder: this engine has no buildx and nothing may be pulled; --pull=false
  # keeps FROM on the local base image.
  local blog
  blog=$(mktemp "${TMPDIR:-/tmp}/control-osworld-docker-build.XXXXXX.log")
  # (No --label: each one costs another layer commit; the tag carries the hash.)
  DOCKER_BUILDKIT=0 docker build --pull=false --build-arg "BASE=$base_tag" -t "$desktop_tag" -t "$DESKTOP_REPO:latest" -f "$VM_DIR/Dockerfile" "$VM_DIR" >"$blog" 2>&1 ||
    { tail -40 "$blog" >&2; rm -f "$blog"; die "docker build of vm/Dockerfile failed (log above)"; }
  rm -f "$blog"
  phase_done "docker build"
  if [ -n "$RM_PID" ]; then wait "$RM_PID" || true; fi

  # Older desktop images of this machine are dead weight (a few GB with their bases):
  # keep the current ones only (CONTROL_OSWORLD_KEEP_OLD_IMAGES=1 keeps all). Images that
  # containers still use are left alone (no -f).
  local old
  if [ -z "${CONTROL_OSWORLD_KEEP_OLD_IMAGES:-}" ]; then
    for old in $( { docker image ls --format '{{.Repository}}:{{.Tag}}' "$DESKTOP_REPO"
                    docker image ls --format '{{.Repository}}:{{.Tag}}' "$BASE_REPO"; } 2>/dev/null); do
      case $old in "$desktop_tag"|"$base_tag"|"$DESKTOP_REPO:latest") continue ;; esac
      if docker image rm "$old" >/dev/null 2>&1; then log "removed old image $old"; fi
    done
    # Untagged leftovers of ours (a --force rebuild re-uses tags); the label is set on the
    # base at import and inherited by the desktop, so nobody else's images match.
    docker image prune -f --filter label=control-osworld.base-hash >/dev/null 2>&1 || true
  fi

  log "built $desktop_tag (+ :latest), $(docker image inspect -f '{{.Size}}' "$desktop_tag" |
    awk '{printf "%.2f GB", $1/1e9}'), in $(( $(date +%s) - t_start ))s"
}

SELF=$(readlink -f "${BASH_SOURCE[0]}")
VM_DIR=$(dirname "$SELF")
BASE_HASH=""
RM_PID=""
main "$@"
