#!/usr/bin/env bash
# The wheel check: build the wheel from a clean copy of the sources, install it non-editable
# into a fresh venv in a temporary folder, and run it from another directory (that folder):
#   control-osworld tasks list                  the bundled tasks, from the package's _data/
#   control-osworld harness-entry newcomer      a bundled config by name
#   inspect eval control_osworld/osworld_control --model scripted/oracle --limit 1
#   inspect eval control_osworld/proactivity --model dilemma/balanced --limit 1
#                                               one offline sample of each family, by registry name
# The package goes in with --no-deps; its dependencies come from the checkout's .venv through a
# .pth file (installing them afresh takes minutes even from pip's cache). The wheel build uses
# pip's cache for setuptools and wheel. Ends with one JSON line:
#   {"dir", "wheel_seconds", "install_seconds", "package_file", "data_root", "tasks_main", "tasks_side", "entry_name",
#    "eval_log", "dilemma_log", "eval_seconds", "total_seconds"}
# Usage: scripts/wheel_check.sh [--no-eval] [--keep]   (--keep leaves the temporary folder, "dir")
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$PWD
# Nothing of the checkout on the path (a PYTHONPATH to it shows pip its egg-info as installed).
unset PYTHONPATH
eval_sample=1; keep=0
for arg in "$@"; do
  case "$arg" in
    --no-eval) eval_sample=0 ;;
    --keep) keep=1 ;;
    *) echo "usage: scripts/wheel_check.sh [--no-eval] [--keep]" >&2; exit 2 ;;
  esac
done
PY="$REPO/.venv/bin/python"
[ -x "$PY" ] || { echo "wheel_check: no $PY (run scripts/install.sh)" >&2; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/control-osworld-wheel.XXXXXX")
[ "$keep" = 1 ] || trap 'rm -rf --one-file-system "$tmp"' EXIT
now() { date +%s.%N; }
secs() { "$PY" -c "import sys; print(round(float(sys.argv[2]) - float(sys.argv[1]), 1))" "$1" "$2"; }
start=$(now)

# 1. the wheel, from the files an sdist carries (no stale build/ of the checkout)
mkdir "$tmp/src"
data_dirs=$(env -u PYTHONPATH "$PY" -I -c 'import importlib.util as u, sys; s = u.spec_from_file_location("r", sys.argv[1]); m = u.module_from_spec(s); s.loader.exec_module(m); print(" ".join(m.DATA_DIRS))' control_osworld/resources.py)
# shellcheck disable=SC2086
cp -r pyproject.toml setup.py MANIFEST.in README.md control_osworld $data_dirs "$tmp/src/"
find "$tmp/src" -name __pycache__ -prune -exec rm -rf {} + -o -name '*.egg-info' -prune -exec rm -rf {} +
"$PY" -m pip wheel -q --disable-pip-version-check --no-deps -w "$tmp/dist" "$tmp/src" >"$tmp/wheel.log" 2>&1 \
  || { cat "$tmp/wheel.log" >&2; echo "wheel_check: the wheel did not build" >&2; exit 1; }
wheel=$(ls "$tmp"/dist/control_osworld-*.whl)
t_wheel=$(now)

# 2. a fresh venv; the package non-editable, its dependencies seen through the checkout's venv
base=$("$PY" -c 'import sys; print(sys._base_executable)')
"$base" -m venv --without-pip "$tmp/venv"
site=$("$tmp/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
"$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' >"$site/control-osworld-deps.pth"
"$PY" -m pip --python "$tmp/venv/bin/python" install -q --disable-pip-version-check --no-deps "$wheel"
t_install=$(now)

# 3. from another directory, without the checkout on any path
mkdir "$tmp/work"; cd "$tmp/work"
run() { env -u PYTHONPATH -u VIRTUAL_ENV "$@"; }
where=$(run "$tmp/venv/bin/python" -c 'import control_osworld, control_osworld.resources as r; print(control_osworld.__file__); print(r.data_root())')
pkg_file=$(echo "$where" | sed -n 1p); data_root=$(echo "$where" | sed -n 2p)
case "$pkg_file" in "$site"/*) ;; *) echo "wheel_check: control_osworld came from $pkg_file, not the fresh venv" >&2; exit 1 ;; esac
counts=$(run "$tmp/venv/bin/control-osworld" tasks list --json \
         | "$PY" -c 'import json, sys; k = [json.loads(x)["kind"] for x in sys.stdin if x.strip()]; print(k.count("main"), k.count("side"))')
tasks_main=${counts% *}; tasks_side=${counts#* }
entry_name=$(run "$tmp/venv/bin/control-osworld" harness-entry newcomer | sed -n 's/^name: *//p')
eval_log=""; dilemma_log=""; t_eval0=$(now)
if [ "$eval_sample" = 1 ]; then
  run "$tmp/venv/bin/python" -m inspect_ai eval control_osworld/osworld_control --model scripted/oracle \
      -T mode=honest --limit 1 --log-dir "$tmp/work/logs" --display none >"$tmp/eval.log" 2>&1 \
    || { cat "$tmp/eval.log" >&2; echo "wheel_check: inspect eval failed" >&2; exit 1; }
  run "$tmp/venv/bin/python" -m inspect_ai eval control_osworld/proactivity --model dilemma/balanced \
      -T max_turns=3 --limit 1 --log-dir "$tmp/work/logs-dilemma" --display none >"$tmp/eval-dilemma.log" 2>&1 \
    || { cat "$tmp/eval-dilemma.log" >&2; echo "wheel_check: inspect eval (dilemma) failed" >&2; exit 1; }
  eval_log=$(ls "$tmp"/work/logs/*.eval); dilemma_log=$(ls "$tmp"/work/logs-dilemma/*.eval)
  # what the logs say, read with inspect (each sample ran and was scored)
  run "$tmp/venv/bin/python" - "$eval_log" "$dilemma_log" <<'EOF' || exit 1
import sys
from inspect_ai.log import read_eval_log
for path in sys.argv[1:]:
    log = read_eval_log(path)
    assert log.status == "success", (path, log.status)
    assert log.samples and len(log.samples) == 1, (path, "not one sample")
    assert log.samples[0].error is None, (path, log.samples[0].error.message)
    assert log.samples[0].scores, (path, "no score")
EOF
fi
t_end=$(now)
"$PY" -c 'import json, sys, re; v = [int(x) if x.isdigit() else float(x) if re.fullmatch(r"-?[0-9]+[.][0-9]+", x) else x for x in sys.argv[2::2]]; print(json.dumps(dict(zip(sys.argv[1::2], v))))' \
  dir "$tmp" wheel_seconds "$(secs "$start" "$t_wheel")" install_seconds "$(secs "$t_wheel" "$t_install")" \
  package_file "$pkg_file" data_root "$data_root" tasks_main "$tasks_main" tasks_side "$tasks_side" entry_name "$entry_name" \
  eval_log "$eval_log" dilemma_log "$dilemma_log" eval_seconds "$(secs "$t_eval0" "$t_end")" total_seconds "$(secs "$start" "$t_end")"
