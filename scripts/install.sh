#!/usr/bin/env bash
# Installs everything control-osworld needs on a Debian/Ubuntu machine:
#   - the desktop's Debian packages (vm/packages.txt) and the host tools (bubblewrap,
#     tesseract, python3-venv);
#   - the desktop's own python venv at /opt/control-osworld/venv (pyautogui & co);
#   - this package with its test extras into the project's own virtual environment, .venv in
#     the checkout (never into the system's python: Debian's and Ubuntu's are "externally
#     managed", PEP 668). Its interpreter: $PYTHON if set, else the first of `python3` on PATH,
#     /usr/bin/python3, python3.13, python3.12, python3.11 that is Python >= 3.11;
#   - with --docker, the desktop image (vm/build-image.sh).
# Then: .venv/bin/control-osworld, .venv/bin/python -m pytest, or `source .venv/bin/activate`.
# Idempotent: a second run only checks. Needs root (or sudo) for apt and /opt; run it as the
# user who owns the checkout (it calls sudo itself), so that .venv belongs to that user.
set -euo pipefail
cd "$(dirname "$0")/.."

docker_image=0
for arg in "$@"; do
  case "$arg" in
    --docker) docker_image=1 ;;
    *) echo "usage: scripts/install.sh [--docker]" >&2; exit 2 ;;
  esac
done

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "scripts/install.sh: not root and no sudo: run it as root or install sudo" >&2; exit 1; }
  SUDO="sudo"
fi
ROOT="${CONTROL_OSWORLD_ROOT:-/opt/control-osworld}"
VENV="$PWD/.venv"

step() { printf '\n== %s\n' "$*"; }
die() { echo "scripts/install.sh: $*" >&2; exit 1; }

packages=$(grep -v '^\s*#' vm/packages.txt | sed 's/#.*//' | tr -s ' \n' '\n' | sed '/^$/d' | tr '\n' ' ')
# git: control-arena imports GitPython, which needs the executable.
host_packages="bubblewrap debootstrap tesseract-ocr tesseract-ocr-eng python3 python3-venv git"
if [ "$docker_image" = 1 ] && ! command -v docker >/dev/null; then
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
if [ "$docker_image" = 1 ] && command -v systemctl >/dev/null && [ -d /run/systemd/system ] \
   && ! docker info >/dev/null 2>&1; then
  $SUDO systemctl start docker || true
fi

step "desktop python at $ROOT/venv"
if [ ! -x "$ROOT/venv/bin/python" ]; then
  $SUDO mkdir -p "$ROOT"
  $SUDO /usr/bin/python3 -m venv --system-site-packages "$ROOT/venv"
fi
$SUDO "$ROOT/venv/bin/pip" install -q --disable-pip-version-check -r vm/requirements.txt
# pyautogui needs a display to import, so only look the modules up here.
"$ROOT/venv/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('pyautogui', 'mss', 'pyatspi', 'PIL', 'Xlib')))" \
  || die "the desktop venv at $ROOT/venv lacks pyautogui/mss/pyatspi/PIL/Xlib"

new_enough() { "$1" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; }
step "control-osworld (python package) in $VENV"
if [ -x "$VENV/bin/python" ] && ! new_enough "$VENV/bin/python"; then
  echo "$VENV is broken or older than Python 3.11 (its interpreter moved?): recreating it"
  rm -rf --one-file-system "$VENV"
fi
if [ ! -x "$VENV/bin/python" ]; then
  PY=""
  for cand in ${PYTHON:-} python3 /usr/bin/python3 python3.13 python3.12 python3.11; do
    exe=$(command -v "$cand" 2>/dev/null) || continue
    if new_enough "$exe"; then PY=$exe; break; fi
  done
  [ -n "$PY" ] || die "no Python >= 3.11 found (tried ${PYTHON:-} python3 /usr/bin/python3 python3.1[1-3]); set PYTHON=/path/to/python3.11+"
  echo "creating $VENV with $PY ($("$PY" -c 'import sys; print(sys.version.split()[0])'))"
  "$PY" -m venv "$VENV" || die "$PY -m venv failed (Debian/Ubuntu: apt-get install python3-venv)"
fi
# Editable: code changes need no reinstall; pyproject.toml changes (dependencies, entry points) do.
stamp="$VENV/.control-osworld-pyproject.sha256"
if [ "$(cat "$stamp" 2>/dev/null)" != "$(sha256sum pyproject.toml | cut -c1-64)" ] \
   || ! "$VENV/bin/python" -I -c 'import control_osworld, sys; from pathlib import Path; sys.exit(Path(control_osworld.__file__).resolve().parents[1] != Path.cwd().resolve())' 2>/dev/null; then
  "$VENV/bin/python" -m pip install -q --disable-pip-version-check -e ".[test]"
  sha256sum pyproject.toml | cut -c1-64 >"$stamp"
else
  echo "installed already (pyproject.toml unchanged)"
fi
"$VENV/bin/control-osworld" --version >/dev/null || die "$VENV/bin/control-osworld does not run"

if [ "$docker_image" = 1 ]; then
  step "desktop image"
  # build-image.sh needs root (debootstrap, chroot, mounts).
  $SUDO bash vm/build-image.sh
fi
step "done: .venv/bin/control-osworld, .venv/bin/python -m pytest (or: source .venv/bin/activate)"
