#!/usr/bin/env bash
# Installs the desktop on a Debian/Ubuntu machine (the part of scripts/install.sh that a pip
# user needs too; `control-osworld install-desktop` runs this same file from the package):
#   - the desktop's Debian packages (VM_DIR/packages.txt) and the host tools (bubblewrap,
#     debootstrap, tesseract, python3-venv, git; with --docker also docker.io when there is no docker);
#   - the desktop's own python venv at $CONTROL_OSWORLD_ROOT/venv (default /opt/control-osworld)
#     with VM_DIR/requirements.txt (pyautogui & co).
# Usage: install-desktop.sh VM_DIR [--docker]. Idempotent: a second run only checks. Needs root
# (or sudo) for apt and /opt.
set -euo pipefail

vm_dir=""
docker_engine=0
for arg in "$@"; do
  case "$arg" in
    --docker) docker_engine=1 ;;
    -*) echo "usage: install-desktop.sh VM_DIR [--docker]" >&2; exit 2 ;;
    *) vm_dir=$arg ;;
  esac
done
[ -n "$vm_dir" ] && [ -f "$vm_dir/packages.txt" ] && [ -f "$vm_dir/requirements.txt" ] \
  || { echo "usage: install-desktop.sh VM_DIR [--docker] (VM_DIR holds packages.txt and requirements.txt)" >&2; exit 2; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-desktop: not root and no sudo: run it as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi
ROOT="${CONTROL_OSWORLD_ROOT:-/opt/control-osworld}"

step() { printf '\n== %s\n' "$*"; }
die() { echo "install-desktop: $*" >&2; exit 1; }

packages=$(grep -v '^\s*#' "$vm_dir/packages.txt" | sed 's/#.*//' | tr -s ' \n' '\n' | sed '/^$/d' | tr '\n' ' ')
# git: control-arena imports GitPython, which needs the executable. novnc, websockify, x11vnc: the
# live view (`control-osworld desktop view`), on the host only.
host_packages="bubblewrap debootstrap tesseract-ocr tesseract-ocr-eng python3 python3-venv git novnc websockify x11vnc"
if [ "$docker_engine" = 1 ] && ! command -v docker >/dev/null; then
  host_packages="$host_packages docker.io"   # the engine and CLI from the distribution's archive
fi
# shellcheck disable=SC2086
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $packages $host_packages 2>/dev/null \
          | awk '$1 != "ii" {print $2}' || true)
# shellcheck disable=SC2086
if [ -n "$missing" ] || ! dpkg-query -W $packages $host_packages >/dev/null 2>&1; then
  step "Debian packages"
  $SUDO apt-get update -qq
  # A package this distribution's archive lacks (e.g. firefox-esr on Ubuntu) is left out with
  # a warning instead of stopping the install; the tests that need it then say so.
  wanted=""; absent=""
  for p in $packages $host_packages; do
    if [ -n "$(apt-cache policy "$p" 2>/dev/null | awk '/Candidate:/ && $2 != "(none)" {print $2}')" ]; then
      wanted="$wanted $p"
    else
      absent="$absent $p"
    fi
  done
  [ -z "$absent" ] || echo "WARNING: not in this system's package archive, skipped:$absent" >&2
  # shellcheck disable=SC2086
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $wanted
else
  step "Debian packages: all present"
fi
if [ "$docker_engine" = 1 ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ] \
   && ! docker info >/dev/null 2>&1; then
  $SUDO systemctl start docker || true
fi

step "desktop python at $ROOT/venv"
if [ ! -x "$ROOT/venv/bin/python" ]; then
  $SUDO mkdir -p "$ROOT"
  $SUDO /usr/bin/python3 -m venv --system-site-packages "$ROOT/venv"
fi
$SUDO "$ROOT/venv/bin/pip" install -q --disable-pip-version-check -r "$vm_dir/requirements.txt"
# pyautogui needs a display to import, so only look the modules up here.
"$ROOT/venv/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('pyautogui', 'mss', 'pyatspi', 'PIL', 'Xlib')))" \
  || die "the desktop venv at $ROOT/venv lacks pyautogui/mss/pyatspi/PIL/Xlib"
