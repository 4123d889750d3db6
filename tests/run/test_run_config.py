"""Bad run configs: a ConfigError naming the file and the field (exit code 2 from the CLI);
an unknown desktop provider is refused when the config or the task is built."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from control_osworld.cli import main
from control_osworld.config_file import ConfigError
from control_osworld.control.run import RunConfig

GOOD = "pairings:\n  - untrusted_model: scripted/oracle\n"


def _config(tmp_path: Path, text: str) -> Path:
    p = tmp_path / "run.yaml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("text, field, words", [
    (GOOD + "epochs: many\n", "epochs", "integer"),
    (GOOD + "colour: red\n", "colour", "unknown field"),
    ("modes: [honest]\n", "pairings", "Field required"),
    (GOOD + "provider: cloud9\n", "provider", "unknown desktop provider 'cloud9'"),
])
def test_bad_field_is_a_config_error_naming_file_and_field(tmp_path, text, field, words):
    p = _config(tmp_path, text)
    with pytest.raises(ConfigError) as e:
        RunConfig.load(p)
    msg = str(e.value)
    assert str(p) in msg and f"field {field!r}" in msg and words in msg


def test_unknown_provider_lists_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match=r"known: .*docker.*local.*remote"):
        RunConfig.load(_config(tmp_path, GOOD + "provider: cloud9\n"))


@pytest.mark.parametrize("text, words", [
    ("pairings: [unclosed\n", "not valid YAML"),
    ("- a\n- list\n", "expected a mapping"),
])
def test_unreadable_file_is_a_config_error(tmp_path, text, words):
    p = _config(tmp_path, text)
    with pytest.raises(ConfigError, match=words) as e:
        RunConfig.load(p)
    assert str(p) in str(e.value)


def test_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        RunConfig.load(tmp_path / "absent.yaml")


def test_relative_task_folders_are_relative_to_the_config(tmp_path):
    cfg = RunConfig.load(_config(tmp_path, GOOD + "tasks_dir: mine\nside_tasks_dir: /abs/side\n"))
    assert cfg.tasks_dir == str((tmp_path / "mine").resolve()) and cfg.side_tasks_dir == "/abs/side"


def test_cli_prints_the_problem_and_exits_2(tmp_path):
    p = _config(tmp_path, GOOD + "epochs: many\nprovider: cloud9\n")
    res = CliRunner().invoke(main, ["run", str(p)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert f"{p}: field 'epochs'" in res.output and f"{p}: field 'provider'" in res.output


def test_sandbox_config_refuses_an_unknown_provider():
    from control_osworld.desktop.sandbox import DesktopSandboxConfig

    with pytest.raises(ValidationError, match="unknown desktop provider 'cloud9'"):
        DesktopSandboxConfig(provider="cloud9")
    assert DesktopSandboxConfig(provider="docker").provider == "docker"


def test_task_refuses_an_unknown_provider_when_built():
    from control_osworld.control.task import osworld_control

    with pytest.raises(ValidationError) as e:
        osworld_control(provider="cloud9", main_tasks=["none"])
    msg = str(e.value)
    assert "provider" in msg and "unknown desktop provider 'cloud9'" in msg and "local" in msg



def test_readme_lists_exactly_the_known_providers():
    """The shipped providers, read in a fresh interpreter (tests register providers of their own,
    e.g. test_loop's `doomed-local`, in this one)."""
    import re
    import subprocess
    import sys

    shipped = subprocess.run([sys.executable, "-c", "import json; from control_osworld.desktop.provider import "
                              "provider_names; print(json.dumps(provider_names()))"],
                             capture_output=True, text=True, check=True, cwd=Path(__file__).resolve().parents[2])
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    table = readme.split("## Desktops", 1)[1].split("\n\n", 2)[1]
    listed = re.findall(r"^\| `([a-z0-9-]+)`", table, re.M)
    assert sorted(listed) == json.loads(shipped.stdout)


def test_a_remote_pool_and_its_reset_reach_every_samples_desktop(tmp_path):
    from control_osworld.control.run import build_tasks

    p = _config(tmp_path, GOOD + "modes: [honest]\nprovider: remote\nmain_tasks: [mp-fix-json]\n"
                "url: http://10.0.0.5:5000,http://10.0.0.6:5000\nremote_reset: ./revert {url}\n")
    (task,) = build_tasks(RunConfig.load(p))
    sample = task.dataset[0]
    cfg = (sample.sandbox or task.sandbox).config
    assert cfg.desktop.url == "http://10.0.0.5:5000,http://10.0.0.6:5000"
    assert cfg.desktop.remote_reset == "./revert {url}"


def test_live_view_reaches_every_samples_desktop(tmp_path):
    from control_osworld.control.run import build_tasks

    for on in (False, True):
        p = _config(tmp_path, GOOD + f"modes: [honest]\nmain_tasks: [mp-fix-json]\nlive_view: {str(on).lower()}\n")
        (task,) = build_tasks(RunConfig.load(p))
        sample = task.dataset[0]
        assert (sample.sandbox or task.sandbox).config.live_view is on


def test_realtime_log_is_off_for_offline_scripted_runs_only(tmp_path):
    """inspect's realtime sample buffer: off when every pairing is the scripted model, inspect's
    default (None: on) when any real model runs, and what the config says when it says so."""
    assert RunConfig.load(_config(tmp_path, GOOD)).realtime_log() is False
    mixed = GOOD + "  - untrusted_model: anthropic/claude-sonnet-4-5\n"
    assert RunConfig.load(_config(tmp_path, mixed)).realtime_log() is None
    assert RunConfig.load(_config(tmp_path, GOOD + "log_realtime: true\n")).realtime_log() is True
    assert RunConfig.load(_config(tmp_path, mixed + "log_realtime: false\n")).realtime_log() is False
