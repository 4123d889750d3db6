"""`control-osworld install-desktop` and scripts/install.sh install the desktop with one script,
the one the package ships (control_osworld/desktop/install-desktop.sh), from the vm/ folder the
package reads (the checkout's, or the wheel's copy)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from click.testing import CliRunner

from control_osworld import cli
from control_osworld.desktop.provider import VM_DIR
from control_osworld.resources import package_file

REPO = Path(__file__).resolve().parents[1]
SCRIPT = "control_osworld/desktop/install-desktop.sh"


def test_install_sh_runs_the_packaged_desktop_installer():
    text = (REPO / "scripts" / "install.sh").read_text()
    assert f"bash {SCRIPT} vm --docker" in text and f"bash {SCRIPT} vm\n" in text
    assert "vm/packages.txt |" not in text and "$SUDO apt-get" not in text  # the lists are read in one place
    assert package_file("desktop/install-desktop.sh") == REPO / SCRIPT


def test_the_command_runs_the_script_on_the_packages_vm_folder(monkeypatch):
    calls = []
    monkeypatch.setattr(subprocess, "call", lambda argv: calls.append(argv) or 0)
    r = CliRunner().invoke(cli.main, ["install-desktop"])
    assert r.exit_code == 0, r.output
    assert calls == [["bash", str(REPO / SCRIPT), str(VM_DIR)]]
    assert (VM_DIR / "packages.txt").is_file() and (VM_DIR / "requirements.txt").is_file()
    calls.clear()
    r = CliRunner().invoke(cli.main, ["install-desktop", "--docker"])
    assert r.exit_code == 0 and calls[0][-1] == "--docker" and calls[1][-1] == str(VM_DIR / "build-image.sh")
    calls.clear()
    monkeypatch.setattr(subprocess, "call", lambda argv: calls.append(argv) or 3)
    r = CliRunner().invoke(cli.main, ["install-desktop", "--docker"])
    assert r.exit_code == 3 and len(calls) == 1  # a failed install builds no image


def test_the_script_refuses_a_folder_without_the_package_lists(tmp_path):
    out = subprocess.run(["bash", str(REPO / SCRIPT), str(tmp_path)], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "packages.txt and requirements.txt" in out.stderr
    out = subprocess.run(["bash", str(REPO / SCRIPT), str(VM_DIR), "--bogus"], capture_output=True, text=True, timeout=30)
    assert out.returncode == 2 and "usage" in out.stderr
