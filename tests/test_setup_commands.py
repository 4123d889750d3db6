"""The README's two set-up commands are what CI and the newcomer check run, verbatim."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def readme_setup_commands() -> list[str]:
    """The command lines of the fenced block under the README's "## Two commands"."""
    text = (REPO / "README.md").read_text()
    section = text.split("## Two commands", 1)[1]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    return [line for line in block.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_readme_has_the_two_commands_install_then_run():
    main_job, tests = readme_setup_commands()
    assert main_job.startswith("bash scripts/install.sh && ")
    assert tests.startswith("bash scripts/install.sh --docker && ")
    for cmd in (main_job, tests):
        program = shlex.split(cmd.split("&&", 1)[1])[0]
        # The project's own environment, named in the command itself: no activation step, and
        # never the system's python3 (externally managed on Debian/Ubuntu).
        assert program.startswith(".venv/bin/"), cmd


def test_ci_runs_the_readmes_test_command():
    _, tests = readme_setup_commands()
    install, test_cmd = (part.strip() for part in tests.split("&&", 1))
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    assert install in ci
    runs = [line for line in ci if line.startswith(test_cmd)]
    assert runs and all(flag.startswith("-") for flag in shlex.split(runs[0][len(test_cmd):])), ci
    assert ci.index(install) < ci.index(runs[0])


def test_the_checkouts_venv_is_not_committed():
    import shutil
    import subprocess

    # `.venv` (not `.venv/`): a worktree's .venv may be a link to another checkout's, and git
    # would otherwise track the link and replace a real venv with it at the next checkout.
    assert ".venv" in (REPO / ".gitignore").read_text().split()
    if (REPO / ".git").exists() and shutil.which("git"):
        tracked = subprocess.run(["git", "-C", str(REPO), "ls-files", ".venv"], capture_output=True, text=True)
        assert tracked.stdout.strip() == "", "the checkout tracks .venv"



def test_newcomer_check_runs_the_readmes_commands_with_a_small_config():
    import subprocess

    from control_osworld.control.run import RunConfig

    out = subprocess.run(["bash", str(REPO / "scripts" / "newcomer_check.sh"), "--print-commands"],
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    main_job, tests = readme_setup_commands()
    assert out.stdout.splitlines() == [main_job.replace("configs/offline.yaml", "configs/newcomer.yaml"), tests]
    cfg = RunConfig.load(REPO / "configs" / "newcomer.yaml")
    offline = RunConfig.load(REPO / "configs" / "offline.yaml")
    assert cfg.main_tasks and cfg.provider == offline.provider and cfg.report
    known = {p.stem for p in (REPO / "tasks").rglob("*.json")}
    assert set(cfg.main_tasks) <= known


def test_ci_lints_package_tests_and_scripts_and_type_checks_before_the_tests():
    ci = [line.strip() for line in (REPO / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith("#")]
    lint = ci.index(".venv/bin/ruff check control_osworld tests scripts")
    types = ci.index(".venv/bin/mypy control_osworld")
    tests = next(i for i, line in enumerate(ci) if line.startswith(".venv/bin/python -m pytest"))
    assert lint < tests and types < tests
