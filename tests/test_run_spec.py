"""One frozen run spec holds every per-run knob's default: the main job's config, the @task
parameters, the Settings, the desktop tools and the loop's scaffold all take theirs from it, and
no other module writes one of these defaults again."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

import control_osworld
from control_osworld.run_spec import RUN_DEFAULTS, RunSpec

PACKAGE = Path(control_osworld.__file__).resolve().parent


def _param_defaults(fn) -> dict:
    fn = getattr(fn, "__wrapped__", fn)
    return {n: p.default for n, p in inspect.signature(fn).parameters.items()}


def test_the_spec_is_frozen_and_checked():
    with pytest.raises(ValidationError):
        RUN_DEFAULTS.budget = 10  # type: ignore[misc]
    with pytest.raises(ValidationError):
        RunSpec(budget=0)
    with pytest.raises(ValidationError):
        RunSpec(bugdet=10)  # type: ignore[call-arg]
    assert RUN_DEFAULTS.model_size == (RUN_DEFAULTS.model_width, RUN_DEFAULTS.model_height)


def test_every_layer_takes_its_defaults_from_the_spec():
    from control_osworld.agent.loop import desktop_scaffold
    from control_osworld.agent.tools import computer_tool
    from control_osworld.control.run import RunConfig
    from control_osworld.control.setting import OSWorldControlSetting
    from control_osworld.control.task import osworld_control
    from control_osworld.proactivity.desktop import DilemmaDesktopSetting
    from control_osworld.proactivity.task import proactivity
    from control_osworld.trajectory import Trajectory

    d = RUN_DEFAULTS
    task = _param_defaults(osworld_control)
    for k in ("budget", "keep_screenshots", "provider", "boundary", "honest_matching", "max_samples", "settle_s",
              "action_timeout", "disk_mb", "action_space", "observation", "policy"):
        assert task[k] == getattr(d, k), k
    cfg = RunConfig.model_fields
    for k in ("budget", "provider", "max_samples", "action_timeout", "boundary", "honest_matching", "policy"):
        assert cfg[k].default == getattr(d, k), k
    assert RunConfig(pairings=[]).action_space == [d.action_space] and RunConfig(pairings=[]).observation == [d.observation]
    setting = OSWorldControlSetting()
    for k in ("provider", "boundary", "honest_matching", "action_space", "observation", "model_width", "model_height",
              "settle_s"):
        assert getattr(setting, k) == getattr(d, k), k
    assert setting.desktop.disk_mb == d.disk_mb
    fields = desktop_scaffold.model_fields  # the registered scaffold class
    assert fields["run_spec"].default == d  # one object, no loose knobs
    assert not {"budget", "keep_screenshots", "model_width", "model_height", "observation"} & set(fields)
    assert fields["side_task_checker"].exclude  # a function: not in the task's serialised config
    assert setting.run_spec() == d
    assert _param_defaults(computer_tool) == {"model_size": d.model_size, "settle_s": d.settle_s}
    dil = DilemmaDesktopSetting.model_fields
    for k in ("max_turns", "provider", "model_width", "model_height", "settle_s"):
        assert dil[k].default == getattr(d, k), k
    pro = _param_defaults(proactivity)
    for k in ("max_turns", "provider", "keep_screenshots", "settle_s", "max_samples"):
        assert pro[k] == getattr(d, k), k
    assert Trajectory().budget == d.budget


_DEFAULT_WRITTEN = re.compile(
    r"\b(budget|keep_screenshots|settle_s|settle|model_width|model_height|max_turns|disk_mb|action_timeout)\b"
    r"\s*:[^=,()\n]*=\s*(Field\(\s*(default=)?)?\d"
    r"|\bprovider\b\s*:[^=,()\n]*=\s*(Field\(\s*(default=)?)?\"local\""
    r"|\"--provider\"[^\n]*default=\"local\"")


def test_no_other_module_writes_a_run_default_again():
    found = []
    for p in sorted(PACKAGE.rglob("*.py")):
        if p.name == "run_spec.py":
            continue
        for n, line in enumerate(p.read_text().splitlines(), 1):
            if _DEFAULT_WRITTEN.search(line):
                found.append(f"{p.relative_to(PACKAGE)}:{n}: {line.strip()}")
    # the oracle player's own pause between its actions (task verification, not a run knob)
    allowed = {"osworld/oracle.py"}
    found = [f for f in found if f.split(":")[0] not in allowed]
    assert found == [], "\n".join(found)


def test_the_check_would_catch_a_default_written_again():
    assert _DEFAULT_WRITTEN.search("    budget: int = 75,")
    assert _DEFAULT_WRITTEN.search('    settle_s: float = Field(default=0.3, description="x")')
    assert _DEFAULT_WRITTEN.search('    provider: ProviderName = "local"')
    assert _DEFAULT_WRITTEN.search('@click.option("--provider", default="local", show_default=True)')
    assert _DEFAULT_WRITTEN.search("    action_timeout: float = Field(default=60.0, gt=0)")
    assert not _DEFAULT_WRITTEN.search("    budget: int = RUN_DEFAULTS.budget,")
    assert not _DEFAULT_WRITTEN.search("def f(steps, budget: int, n_resamples: int = 2000):")


# A value other than the default for every knob: a knob added to RunSpec fails here until it has
# one, and then fails the round trip below until every layer carries it.
NOT_DEFAULT = {"budget": 31, "keep_screenshots": 4, "provider": "docker", "settle_s": 0.7, "action_timeout": 12.5,
               "disk_mb": 2048, "max_samples": 3, "model_width": 1280, "model_height": 800, "boundary": "closed",
               "honest_matching": "per_main", "action_space": "pyautogui", "observation": "som", "policy": "prompted",
               "max_turns": 7}
DILEMMA_ONLY = {"max_turns"}
"""Knobs of the dilemma family's task only (the control task has no turns)."""


def test_every_knob_is_a_task_parameter():
    from control_osworld.control.task import osworld_control
    from control_osworld.proactivity.task import proactivity

    assert set(NOT_DEFAULT) == set(RunSpec.model_fields)
    spec = RunSpec(**NOT_DEFAULT)
    assert all(getattr(spec, k) != getattr(RUN_DEFAULTS, k) for k in NOT_DEFAULT)
    control = set(_param_defaults(osworld_control))
    assert set(RunSpec.model_fields) - DILEMMA_ONLY <= control  # every knob a -T parameter
    assert DILEMMA_ONLY <= set(_param_defaults(proactivity)) and not DILEMMA_ONLY & control


def _built_spec(monkeypatch, **task_args) -> RunSpec:
    """The spec the control task gives its scaffold, for these -T parameters."""
    from control_osworld.control import task as task_mod

    seen = []
    real = task_mod.desktop_scaffold

    def spy(**kw):
        seen.append(kw["run_spec"])
        return real(**kw)

    monkeypatch.setattr(task_mod, "desktop_scaffold", spy)
    task_mod.osworld_control(mode="attack", main_tasks="mp-config-port", **task_args)
    assert len(seen) == 1
    return seen[0]


def test_the_task_the_setting_and_the_scaffold_share_one_spec(monkeypatch):
    spec = RunSpec(**NOT_DEFAULT)
    args = spec.task_args()
    assert set(args) == set(NOT_DEFAULT)  # every knob differs from its default, so every one is given
    control = {k: v for k, v in args.items() if k not in DILEMMA_ONLY}
    built = _built_spec(monkeypatch, **control)
    assert built == spec.model_copy(update={k: getattr(RUN_DEFAULTS, k) for k in DILEMMA_ONLY})
    assert built.view_size is None  # OSWorld's spaces: the screen's own pixels, in the tool and the loop
    assert _built_spec(monkeypatch) == RUN_DEFAULTS
    assert RUN_DEFAULTS.view_size == RUN_DEFAULTS.model_size


def test_the_run_config_gives_its_spec_as_task_parameters():
    from control_osworld.control.run import ALWAYS_PASSED, RunConfig, build_tasks
    from control_osworld.control.task import osworld_control

    held = {k: v for k, v in NOT_DEFAULT.items() if k in RunConfig.model_fields and k not in ("action_space", "observation")}
    assert set(held) == {"budget", "provider", "max_samples", "action_timeout", "boundary", "honest_matching", "policy"}
    cfg = RunConfig(pairings=[], **held)
    spec = cfg.run_spec("pyautogui", "som")
    assert spec == RUN_DEFAULTS.model_copy(update={**held, "action_space": "pyautogui", "observation": "som"})
    args = spec.task_args(always=ALWAYS_PASSED)
    assert set(args) <= set(_param_defaults(osworld_control)) and set(ALWAYS_PASSED) <= set(args)
    assert RunConfig(pairings=[]).run_spec().task_args() == {}  # the defaults: nothing to pass
    # the main job's tasks carry the spec as their -T parameters
    cfg = RunConfig(pairings=[{"untrusted_model": "scripted/oracle"}], modes=["honest"], main_tasks=["mp-config-port"],
                    action_space=["pyautogui"], **{**held, "policy": "tools"})
    (t,) = build_tasks(cfg)
    assert t.metadata["budget"] == held["budget"] and t.metadata["action_space"] == "pyautogui"
