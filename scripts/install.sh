#!/usr/bin/env bash
# Installs everything control-osworld needs on a Debian/Ubuntu machine:
#   - the desktop's Debian packages (vm/packages.txt) and the host tools (bubblewrap, tesseract);
#   - the desktop's own python venv at /opt/control-osworld/venv (pyautogui & co);
#   - this package with its test extras, into the current python;
#   - with --docker, the desktop image (vm/build-image.sh).
# Idempotent: a second run only checks. Needs root (or sudo) for apt and /opt.
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
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
PY="${PYTHON:-python3}"
ROOT="${CONTROL_OSWORLD_ROOT:-/opt/control-osworld}"

step() { printf '\n== %s\n' "$*"; }

packages=$(grep -v '^\s*#' vm/packages.txt | grep -v '^\s*$' | tr '\n' ' ')
host_packages="bubblewrap debootstrap tesseract-ocr tesseract-ocr-eng"
missing=$(dpkg-query -W -f='${db:Status-Abbrev} ${Package}\n' $packages $host_packages 2>/dev/null \
          | awk '$1 != "ii" {print $2}' || true)
if [ -n "$missing" ] || ! dpkg-query -W $packages $host_packages >/dev/null 2>&1; then
  step "Debian packages"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $packages $host_packages
else
  step "Debian packages: all present"
fi

step "desktop python at $ROOT/venv"
if [ ! -x "$ROOT/venv/bin/python" ]; then
  $SUDO mkdir -p "$ROOT"
  $SUDO /usr/bin/python3 -m venv --system-site-packages "$ROOT/venv"
fi
$SUDO "$ROOT/venv/bin/pip" install -q --disable-pip-version-check -r vm/requirements.txt
# pyautogui needs a display to import, so only look the modules up here.
"$ROOT/venv/bin/python" -c "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('pyautogui', 'mss', 'pyatspi', 'PIL', 'Xlib')))" \
  || { echo "the desktop venv at $ROOT/venv lacks pyautogui/mss/pyatspi/PIL/Xlib" >&2; exit 1; }

step "control-osworld (python package)"
"$PY" -m pip install -q --disable-pip-version-check -e ".[test]"

if [ "$docker_image" = 1 ]; then
  step "desktop image"
  bash vm/build-image.sh
fi
step "done"
