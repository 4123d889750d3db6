"""control_osworld.resources: the one place that knows where the data folders are (the
checkout, else the installed package's copy), and users' own files winning by path."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from control_osworld import resources
from control_osworld.cli_paths import DataPath

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def fresh_root():
    resources.data_root.cache_clear()
    yield
    resources.data_root.cache_clear()


def test_in_the_checkout_the_data_root_is_the_checkout():
    assert resources.data_root() == REPO
    for d in resources.DATA_DIRS:
        assert resources.data_dir(d) == REPO / d and (REPO / d).is_dir()
    with pytest.raises(ValueError, match="unknown data folder 'scripts'"):
        resources.data_dir("scripts")


def test_installed_without_a_checkout_the_packaged_copy_is_used(tmp_path, monkeypatch, fresh_root):
    site = tmp_path / "site-packages"
    pkg = site / "control_osworld"
    (pkg / "_data" / "tasks").mkdir(parents=True)
    monkeypatch.setattr(resources, "_checkout", lambda: site)
    monkeypatch.setattr(resources, "files", lambda name: pkg)
    assert resources.data_root() == pkg / "_data"
    assert resources.data_dir("tasks") == pkg / "_data" / "tasks"


def test_no_checkout_and_no_packaged_copy_is_a_clear_error(tmp_path, monkeypatch, fresh_root):
    monkeypatch.setattr(resources, "_checkout", lambda: tmp_path)
    monkeypatch.setattr(resources, "files", lambda name: tmp_path / "control_osworld")
    with pytest.raises(resources.ResourceError, match="neither in a checkout .* nor installed at"):
        resources.data_root()


def test_a_folder_that_only_looks_like_a_checkout_is_not_one(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "tasks").mkdir()
    assert not resources.is_checkout(tmp_path)  # no side_tasks/, vm/
    (tmp_path / "side_tasks").mkdir()
    (tmp_path / "vm").mkdir()
    assert resources.is_checkout(tmp_path)


def test_users_files_win_by_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert resources.find("configs/offline.yaml") == REPO / "configs" / "offline.yaml"
    (tmp_path / "configs").mkdir()
    (tmp_path / "configs" / "offline.yaml").write_text("log_dir: mine\n")
    assert resources.find("configs/offline.yaml") == Path("configs/offline.yaml")  # the user's, as given
    assert resources.find("nowhere/x.yaml") == Path("nowhere/x.yaml")  # unchanged: the caller's error names it
    assert resources.find_config("newcomer") == REPO / "configs" / "newcomer.yaml"
    assert resources.find_config("per_step_rules", "monitors") == REPO / "monitors" / "per_step_rules.yaml"
    assert "offline" in resources.names("configs")


def test_data_path_finds_bundled_files_by_name_and_keeps_users_files(tmp_path, monkeypatch):
    @click.command()
    @click.argument("config", type=DataPath(folder="configs", exists=True, dir_okay=False))
    def show(config):
        click.echo(config)

    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(show, ["offline"])
    assert r.exit_code == 0 and r.output.strip() == str(REPO / "configs" / "offline.yaml")
    r = CliRunner().invoke(show, ["configs/newcomer.yaml"])
    assert r.exit_code == 0 and r.output.strip() == str(REPO / "configs" / "newcomer.yaml")
    (tmp_path / "mine.yaml").write_text("{}")
    r = CliRunner().invoke(show, ["mine.yaml"])
    assert r.exit_code == 0 and r.output.strip() == "mine.yaml"
    r = CliRunner().invoke(show, ["no-such-config"])
    assert r.exit_code == 2 and "no-such-config" in r.output and "does not exist" in r.output


def test_only_resources_finds_files_next_to_the_code():
    """The data is opened through control_osworld.resources alone: no other module walks up from
    its own file (which breaks in a wheel, where the data sits in control_osworld/_data)."""
    pattern = re.compile(r"__file__|\.parents\[")
    offenders = [f"{p.relative_to(REPO)}:{i}" for p in sorted((REPO / "control_osworld").rglob("*.py"))
                 if p.name != "resources.py"
                 for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert offenders == []


def test_the_build_step_copies_every_data_folder():
    """setup.py's list of files (what the wheel carries under _data/) is every file of DATA_DIRS."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("_setup_under_test", REPO / "setup.py")
    assert spec is not None and spec.loader is not None
    src = (REPO / "setup.py").read_text().replace("\nsetup(cmdclass", "\n_unused = dict(cmdclass")
    mod = importlib.util.module_from_spec(spec)
    exec(compile(src, str(REPO / "setup.py"), "exec"), mod.__dict__)
    got = {rel for _, rel in mod.data_files()}
    want = {f"_data/{p.relative_to(REPO).as_posix()}" for d in resources.DATA_DIRS for p in (REPO / d).rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"}
    assert got == want and "_data/vm/desktop-init.sh" in got and "_data/configs/offline.yaml" in got
