"""The family registry (control_osworld/families.py): both families registered, `run` picks the
config's family, the CLI carries each family's commands, and both Settings share the desktop base."""

from __future__ import annotations

import pytest

from control_osworld.config_file import ConfigError
from control_osworld.families import families, get_family
from control_osworld.run import config_family, run


def test_both_families_are_registered_with_what_the_commands_need():
    fams = families()
    assert sorted(fams) == ["control", "proactivity"]
    assert [c.name for c in fams["control"].commands()] == ["tasks", "harness-entry"]
    assert [c.name for c in fams["proactivity"].commands()] == ["proactivity"]
    with pytest.raises(KeyError, match="unknown family 'nope'.*control, proactivity"):
        get_family("nope")


def test_the_cli_carries_every_familys_commands():
    from control_osworld.cli import main

    for fam in families().values():
        for cmd in fam.commands():
            assert main.commands[cmd.name] is cmd


def test_run_picks_the_configs_family_and_names_the_field_of_an_unknown_one(tmp_path):
    bare = tmp_path / "bare.yaml"
    bare.write_text("pairings: []\n")
    assert config_family(bare) == "control"
    odd = tmp_path / "odd.yaml"
    odd.write_text("family: nope\n")
    assert config_family(odd) == "nope"
    with pytest.raises(ConfigError, match="field 'family': unknown family 'nope'"):
        run(odd)


def test_a_control_config_may_name_its_family():
    from control_osworld.control.run import RunConfig

    assert RunConfig.model_validate({"family": "control", "pairings": []}).family == "control"


def test_both_settings_derive_from_the_desktop_base_and_ask_for_the_same_desktop():
    from control_osworld.control.setting import OSWorldControlSetting
    from control_osworld.desktop_setting import DesktopSetting
    from control_osworld.proactivity.desktop import DilemmaDesktopSetting

    control, dilemma = OSWorldControlSetting(), DilemmaDesktopSetting(scenarios_dir="scenarios/pack")
    assert isinstance(control, DesktopSetting) and isinstance(dilemma, DesktopSetting)
    assert control.get_sandbox_config() == dilemma.get_sandbox_config()
    assert control.get_sandbox_config().config.desktop.network == "sink"
    assert control.submit_description != dilemma.submit_description
