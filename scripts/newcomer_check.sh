#!/usr/bin/env bash
# The newcomer check: the README's two set-up commands, verbatim, on a plain Debian 12.
#
#   bash scripts/newcomer_check.sh [--no-docker] [--sudo-user] [--source DIR] [--keep]
#   bash scripts/newcomer_check.sh --print-commands    the two commands it would run, and exit
#
# 1. builds (or reuses) a plain Debian 12 root filesystem with debootstrap, as vm/build-image.sh
#    does (minbase + ca-certificates, python3 and sudo: Debian's own, externally managed python3;
#    no registry), imported as the image control-osworld-newcomer:<recipe hash>;
# 2. clones the checkout (--source, default: this one; committed state only) afresh and starts a
#    container from that image with the clone in /root/control-osworld;
# 3. runs inside, as root, the README's first command with configs/newcomer.yaml in place of
#    configs/offline.yaml (a few samples; otherwise verbatim), then the README's second command
#    verbatim; with --sudo-user, also the first command as a fresh user with sudo, in a clone
#    that user owns;
# 4. prints the figures, then one JSON line: install_seconds, main_job_seconds, tests_passed,
#    tests_failed (and more).
#
# The container is --privileged (bubblewrap's namespaces, build-image.sh's chroot and mounts)
# on the host's network, with the host's Docker socket (the tests' docker desktops run on the
# host's engine; the container installs the Docker CLI from Debian's docker.io as install.sh
# --docker does). --no-docker runs the second command's install without --docker and the
# tests without the docker ones (`-m "not docker"`): a reduced form, said so in the JSON.
# Only for speed, not behaviour: the host's .deb cache (the one build-image.sh keeps) is the
# container's apt archive cache, and the host's pip settings and CA bundle are copied in
# (pip must trust what the host trusts). CI=true in the container, so a missing prerequisite
# fails a test instead of skipping it. Needs root, docker and debootstrap (apt-get installs it).
set -euo pipefail
cd "$(dirname "$0")/.."

RECIPE=1
INCLUDE="ca-certificates,python3,sudo"
IMAGE_REPO=control-osworld-newcomer
CACHE="${CONTROL_OSWORLD_CACHE:-/var/cache/control-osworld}"
MIRROR="${CONTROL_OSWORLD_MIRROR:-http://deb.debian.org/debian}"
SECMIRROR="${CONTROL_OSWORLD_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
MAIN_CONFIG=configs/newcomer.yaml

docker_tests=1 sudo_user=0 keep=0 print_only=0 source=$PWD
while [ $# -gt 0 ]; do
  case $1 in
    --no-docker) docker_tests=0 ;;
    --sudo-user) sudo_user=1 ;;
    --keep) keep=1 ;;
    --print-commands) print_only=1 ;;
    --source) source=$(readlink -f "$2"); shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done

log() { printf '[newcomer %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# The README's two commands, read from the README itself.
mapfile -t commands < <(awk '/^## Two commands/ {s=1; next} s && /^```bash/ {b=1; next}
                             b && /^```/ {exit} b && NF && $1 !~ /^#/ {print}' "$source/README.md")
[ "${#commands[@]}" = 2 ] || die "expected two commands in the README's \"## Two commands\" block, found ${#commands[@]}"
main_cmd=${commands[0]//configs\/offline.yaml/$MAIN_CONFIG}
test_cmd=${commands[1]}
[ "$main_cmd" != "${commands[0]}" ] || die "the README's first command does not name configs/offline.yaml"
if [ "$docker_tests" = 0 ]; then
  test_cmd=${test_cmd/scripts\/install.sh --docker/scripts\/install.sh}
  test_cmd="$test_cmd -m 'not docker'"
fi
log "main job command: $main_cmd"
log "test command:     $test_cmd"
if [ "$print_only" = 1 ]; then printf '%s\n' "$main_cmd" "$test_cmd"; exit 0; fi
[ "$(id -u)" = 0 ] || die "must run as root (debootstrap, docker, a --privileged container)"
command -v docker >/dev/null && docker info >/dev/null 2>&1 || die "needs the Docker engine"

# ---- 1. the plain Debian 12 image ------------------------------------------------------
tag="$IMAGE_REPO:$(printf 'recipe %s include %s' "$RECIPE" "$INCLUDE" | sha256sum | cut -c1-12)"
if docker image inspect "$tag" >/dev/null 2>&1; then
  log "reusing $tag"
else
  command -v debootstrap >/dev/null || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || die "debootstrap is missing (apt-get install debootstrap)"
  work=$(mktemp -d "${TMPDIR:-/var/tmp}/control-osworld-newcomer.XXXXXX")
  trap 'rm -rf --one-file-system "$work"' EXIT
  mkdir -p "$CACHE/debs/partial"
  t0=$(date +%s)
  log "debootstrap --variant=minbase --include=$INCLUDE bookworm ($MIRROR)"
  debootstrap --variant=minbase --include="$INCLUDE" --cache-dir="$CACHE/debs" bookworm "$work/rootfs" "$MIRROR" \
    >"$work/debootstrap.log" 2>&1 || { tail -30 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  cat >"$work/rootfs/etc/apt/sources.list" <<EOF
deb $MIRROR bookworm main
deb $MIRROR bookworm-updates main
deb $SECMIRROR bookworm-security main
EOF
  rm -rf "$work/rootfs"/var/cache/apt/archives/*.deb "$work/rootfs"/var/lib/apt/lists/*
  : >"$work/rootfs/etc/resolv.conf"
  tar -C "$work/rootfs" --numeric-owner -cf - --exclude='./proc/*' --exclude='./sys/*' --exclude='./dev/*' . |
    docker import - "$tag" >/dev/null || die "docker import failed"
  rm -rf --one-file-system "$work"; trap - EXIT
  log "built $tag in $(( $(date +%s) - t0 )) s"
fi

# ---- 2. a fresh clone, a container ------------------------------------------------------
name="cosw-newcomer-$$"
clone=$(mktemp -d "${TMPDIR:-/var/tmp}/control-osworld-newcomer-clone.XXXXXX")
cleanup() {
  rc=$?
  if [ "$keep" = 0 ]; then docker rm -f "$name" >/dev/null 2>&1 || true; else log "kept container $name"; fi
  rm -rf --one-file-system "$clone"
  exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
git clone -q --no-hardlinks "$source" "$clone/control-osworld" || die "git clone $source failed"
log "cloned $source at $(git -C "$clone/control-osworld" rev-parse --short HEAD)"
mkdir -p "$CACHE/debs/partial"
# --privileged where the engine may grant it; else (an engine itself inside a container, missing
# a capability) every capability but the ones it lacks, unconfined, with the host's cgroups.
if docker run --rm --privileged "$tag" true >/dev/null 2>&1; then
  priv=(--privileged)
else
  priv=(--cap-add ALL --security-opt seccomp=unconfined --security-opt apparmor=unconfined
        --security-opt systempaths=unconfined -v /sys/fs/cgroup:/sys/fs/cgroup)
  caps=(CHOWN DAC_OVERRIDE DAC_READ_SEARCH FOWNER FSETID KILL SETGID SETUID SETPCAP LINUX_IMMUTABLE
        NET_BIND_SERVICE NET_BROADCAST NET_ADMIN NET_RAW IPC_LOCK IPC_OWNER SYS_MODULE SYS_RAWIO SYS_CHROOT
        SYS_PTRACE SYS_PACCT SYS_ADMIN SYS_BOOT SYS_NICE SYS_RESOURCE SYS_TIME SYS_TTY_CONFIG MKNOD LEASE
        AUDIT_WRITE AUDIT_CONTROL SETFCAP MAC_OVERRIDE MAC_ADMIN SYSLOG WAKE_ALARM BLOCK_SUSPEND AUDIT_READ
        PERFMON BPF CHECKPOINT_RESTORE)
  bnd=$((16#$(awk '/^CapBnd/ {print $2}' /proc/self/status)))
  for i in "${!caps[@]}"; do (( bnd >> i & 1 )) || priv+=(--cap-drop "${caps[$i]}"); done
  log "no --privileged on this engine: ${priv[*]}"
fi
# /var/tmp from the host's disk: vm/build-image.sh debootstraps there (device nodes), which the
# container's own overlay does not allow.
mkdir -p "$clone/var-tmp"
# --init: the container's pid 1 reaps orphans, as a machine's init does (with `sleep` as pid 1, a
# desktop whose starter was killed stays a zombie for good).
run_args=("${priv[@]}" --init --network host -v "$CACHE/debs:/var/cache/apt/archives" -v "$clone/var-tmp:/var/tmp"
          -e CI=true -e TERM=dumb -e LANG=C.UTF-8 --hostname newcomer)
[ "$docker_tests" = 0 ] || run_args+=(-v /var/run/docker.sock:/var/run/docker.sock)
docker run -d --name "$name" "${run_args[@]}" "$tag" sleep infinity >/dev/null
docker cp "$clone/control-osworld" "$name:/root/control-osworld"
# pip trusts what the host trusts (e.g. a TLS-intercepting proxy's CA), as in build-image.sh.
ca=${PIP_CERT:-/etc/ssl/certs/ca-certificates.crt}
if [ -f "$ca" ]; then
  docker cp -L "$ca" "$name:/etc/newcomer-host-ca.crt"
  docker exec "$name" sh -c 'printf "[global]\ncert = /etc/newcomer-host-ca.crt\n" >/etc/pip.conf'
fi
docker exec "$name" sh -c 'python3 -c "import sys; print(sys.version)"; ls /usr/lib/python3*/EXTERNALLY-MANAGED' >&2 \
  || die "the image's python3 is not Debian's externally managed one"

# run USER LOGFILE COMMAND: the command, verbatim, through `bash -xc` in the clone (the trace
# shows when each of its top-level commands starts); each output line is prefixed with the time
# it arrived (the trace's PS4 is no help: bash ignores PS4 from the environment as root).
results=$(mktemp -d "${TMPDIR:-/tmp}/control-osworld-newcomer-logs.XXXXXX")
run() {
  local user=$1 logf=$2 cmd=$3 dir=/root/control-osworld home=/root
  [ "$user" = root ] || { dir=/home/$user/control-osworld; home=/home/$user; }
  log "as $user: $cmd  (log: $logf)"
  timeout "${SUDO_LIMIT:-14400}" docker exec -u "$user" -w "$dir" -e HOME="$home" "$name" bash -xc "$cmd" 2>&1 |
    while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$logf"
  return "${PIPESTATUS[0]}"
}
# seconds between the trace lines of the first and the second top-level command (the install).
span() { awk '$2 == "+" && ($3 == "bash" || $3 ~ /^\.venv\//) {t[++k]=$1} END {if (k >= 2) printf "%.1f", t[2]-t[1]}' "$1"; }
stamp() { date +%s.%N; }

t0=$(stamp)
rc1=0; run root "$results/main.log" "$main_cmd" || rc1=$?
t1=$(stamp)
install_s=$(span "$results/main.log" 1)
main_s=$(awk -v a="$t0" -v b="$t1" -v i="$install_s" 'BEGIN {printf "%.1f", b - a - i}')
log "main job command: exit $rc1, install ${install_s}s, main job ${main_s}s"
tail -5 "$results/main.log" >&2

t2=$(stamp)
rc2=0; run root "$results/tests.log" "$test_cmd" || rc2=$?
t3=$(stamp)
install2_s=$(span "$results/tests.log" 1)
tests_s=$(awk -v a="$t2" -v b="$t3" -v i="$install2_s" 'BEGIN {printf "%.1f", b - a - i}')
summary=$(cut -d' ' -f2- "$results/tests.log" | grep -E '^(=+ )?[0-9]+ (passed|failed|error)' | tail -1 || true)
count() { grep -oE "[0-9]+ $1" <<<"$summary" | cut -d' ' -f1 || true; }
passed=$(count passed); failed=$(count failed); errors=$(count errors); skipped=$(count skipped)
log "test command: exit $rc2: $summary"
cut -d' ' -f2- "$results/tests.log" | grep -E '^(FAILED|ERROR) ' >&2 || true

sudo_rc=null
if [ "$sudo_user" = 1 ]; then
  docker exec "$name" sh -c 'useradd -m -s /bin/bash newcomer && echo "newcomer ALL=(ALL) NOPASSWD:ALL" >/etc/sudoers.d/newcomer'
  docker cp "$clone/control-osworld" "$name:/home/newcomer/control-osworld"
  docker exec "$name" chown -R newcomer:newcomer /home/newcomer/control-osworld
  sudo_rc=0; SUDO_LIMIT=${NEWCOMER_SUDO_TIMEOUT:-2400} run newcomer "$results/sudo-main.log" "$main_cmd" || sudo_rc=$?
  log "main job command as a sudo user: exit $sudo_rc"; tail -5 "$results/sudo-main.log" >&2
fi
if [ "$keep" = 1 ]; then log "logs kept in $results"; else
  for f in "$results"/*.log; do cp "$f" "/tmp/newcomer-$(basename "$f")"; done
  log "logs: /tmp/newcomer-*.log"; rm -rf "$results"; fi

printf '{"install_seconds": %s, "main_job_seconds": %s, "tests_passed": %s, "tests_failed": %s, "tests_errors": %s, "tests_skipped": %s, "tests_seconds": %s, "second_install_seconds": %s, "main_job_exit": %s, "tests_exit": %s, "sudo_user_main_job_exit": %s, "docker_tests": %s, "image": "%s", "python3": "debian-externally-managed"}\n' \
  "${install_s:-null}" "$main_s" "${passed:-0}" "${failed:-0}" "${errors:-0}" "${skipped:-0}" "$tests_s" \
  "${install2_s:-null}" "$rc1" "$rc2" "$sudo_rc" "$( [ "$docker_tests" = 1 ] && echo true || echo false)" "$tag"
[ "$rc1" = 0 ] && [ "$rc2" = 0 ] && { [ "$sudo_rc" = null ] || [ "$sudo_rc" = 0 ]; }
