#!/usr/bin/env bash
# Installs everything control-osworld needs on a Debian/Ubuntu machine:
#   - the desktop (control_osworld/desktop/install-desktop.sh, also `control-osworld
#     install-desktop`): its Debian packages (vm/packages.txt), the host tools (bubblewrap,
#     tesseract, python3-venv) and its own python venv at /opt/control-osworld/venv (pyautogui & co);
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
VENV="$PWD/.venv"

step() { printf '\n== %s\n' "$*"; }
die() { echo "scripts/install.sh: $*" >&2; exit 1; }

# The desktop (Debian packages, host tools, the desktop's python): the same file that
# `control-osworld install-desktop` runs from an installed package.
if [ "$docker_image" = 1 ]; then
  bash control_osworld/desktop/install-desktop.sh vm --docker
else
  bash control_osworld/desktop/install-desktop.sh vm
fi

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
