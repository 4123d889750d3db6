"""The package as a wheel: built, installed non-editable into a fresh venv, run from another
directory (scripts/wheel_check.sh; CI runs it through this test), and what the wheel must carry."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from control_osworld.resources import DATA_DIRS
from tests.conftest import require
from tests.desktop.conftest import local_ready

REPO = Path(__file__).resolve().parents[1]


def _checkout_counts() -> tuple[int, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "control_osworld.cli", "tasks", "list", "--json"],
                         capture_output=True, text=True, env=env, timeout=120, check=True)
    kinds = [json.loads(line)["kind"] for line in out.stdout.splitlines() if line.strip()]
    return kinds.count("main"), kinds.count("side")


def _files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and not p.name.endswith(".pyc")}


@pytest.mark.slow
@pytest.mark.desktop  # the osworld_control sample runs on the embedded desktop
def test_the_wheel_installed_non_editable_runs_from_another_directory():
    require(*local_ready())
    # Not under pytest's tmp_path: the desktop's unprivileged uid must reach the run folder.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "TMPDIR")}
    out = subprocess.run(["bash", str(REPO / "scripts" / "wheel_check.sh"), "--keep"], capture_output=True,
                         text=True, env=env, timeout=600)
    assert out.returncode == 0, out.stderr[-4000:]
    res = json.loads(out.stdout.strip().splitlines()[-1])
    tmp = Path(res["dir"])
    try:
        _check(res, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _check(res: dict, tmp: Path) -> None:
    site = Path(res["package_file"]).parents[1]
    # the code and the data came from the fresh venv, not from this checkout
    assert site.is_relative_to(tmp / "venv"), res
    assert Path(res["data_root"]) == site / "control_osworld" / "_data"
    assert not Path(res["package_file"]).is_relative_to(REPO)
    # the same tasks as the checkout lists, a bundled config found by name, one scored sample
    assert (int(res["tasks_main"]), int(res["tasks_side"])) == _checkout_counts()
    assert res["entry_name"] == "'control-osworld (this harness: configs/newcomer.yaml)'"
    for key in ("eval_log", "dilemma_log"):
        assert Path(res[key]).is_file() and Path(res[key]).is_relative_to(tmp / "work"), key
    # every data folder travelled whole (apart from caches), file for file
    [wheel] = list((tmp / "dist").glob("control_osworld-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    for d in DATA_DIRS:
        want = {f"control_osworld/_data/{d}/{f}" for f in _files_under(REPO / d)}
        assert want and want <= names, (d, sorted(want - names)[:5])
    assert "control_osworld/desktop/install-desktop.sh" in names
    # vm/ keeps its exec bits in the wheel (the desktop runs desktop-init.sh; vm_hash counts them)
    mode = zipfile.ZipFile(wheel).getinfo("control_osworld/_data/vm/desktop-init.sh").external_attr >> 16
    assert mode & 0o111
    # the docker provider names the image by vm_hash(vm/): the installed copy gives the same tag
    from control_osworld.desktop.docker import vm_hash

    assert vm_hash(Path(res["data_root"]) / "vm") == vm_hash(REPO / "vm")
