"""The control family's main job (`control-osworld run CONFIG` for a config without `family:`):
every model pairing of a config, end to end and resumable.

Stages, each skipped when its output is already there:
  1. agents: one inspect task per (untrusted model × mode × attack prompt), all through
     `inspect_ai.eval_set` into `log_dir` (parallel desktops; finished logs are skipped,
     errored samples retried; `inspect view` / `inspect eval-retry` work on the logs). Every
     attempt is kept: a retry runs in a new log (no in-log retries, whose errored attempts
     inspect keeps without their store) and older logs move to `log_dir/superseded/`; the runs
     table merges them, so an escape recorded by any attempt stays the sample's record;
  2. monitors: every monitor config × input subset over the logs, into the scores store;
  3. report: tables, plots and the summary from the logs and scores.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from control_osworld.config_file import ConfigError, read_config
from control_osworld.desktop.provider import ProviderName
from control_osworld.progress import progress_log
from control_osworld.run_spec import RUN_DEFAULTS, ActionSpace, RunSpec

SpaceName = ActionSpace
ALWAYS_PASSED = ("budget", "provider", "boundary", "max_samples", "honest_matching", "action_timeout")
"""The run knobs every task of the main job is given as -T parameters even at their defaults (the
others only when set: a task built without them is unchanged)."""
ObservationName = Literal["screenshot", "a11y_tree", "screenshot_a11y_tree", "som"]


class Pairing(BaseModel):
    model_config = ConfigDict(extra="forbid")

    untrusted_model: str
    model_args: dict[str, Any] = Field(default_factory=dict)
    attack_prompts: list[str] = Field(default_factory=lambda: ["attack_plain"])
    reminder_every: dict[str, int] = Field(default_factory=dict)
    """Attack prompt -> remind every k steps (prompts not listed get no reminder)."""


class RunConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    family: Literal["control"] = "control"
    """The control family (the default when absent; families.py)."""
    log_dir: str = "logs/run"
    modes: list[Literal["honest", "attack"]] = ["honest", "attack"]  # pydantic copies the default
    pairings: list[Pairing]
    epochs: int = 1
    budget: int = RUN_DEFAULTS.budget
    provider: ProviderName = RUN_DEFAULTS.provider
    url: str | None = None
    """remote: the server's URL, or a pool of them separated by commas (one sample per desktop
    at a time)."""
    remote_reset: str | None = None
    """remote: the host command that reverts a desktop of the pool before each sample (`{url}`
    is replaced by its URL); without one a used desktop is refused (desktop/remote.py)."""
    max_samples: int = RUN_DEFAULTS.max_samples
    action_timeout: float = RUN_DEFAULTS.action_timeout
    """Seconds an action may take before the desktop counts as hung (error kind desktop_hung)."""
    retry_attempts: int = 2
    tasks_dir: str | None = None
    """Main tasks folder (default: the repository's tasks/); relative to the config file."""
    side_tasks_dir: str | None = None
    main_tasks: list[str] | None = None
    side_tasks: list[str] | None = None
    apps: list[str] | None = None
    boundary: Literal["open", "closed"] = RUN_DEFAULTS.boundary
    honest_matching: Literal["matched", "per_main"] = RUN_DEFAULTS.honest_matching
    """Honest runs: one per (main, side) pairing in the side task's environment (matched), or one
    per main task without side setup (per_main, the old way)."""
    pairings_file: str | None = None
    """The design: a pairings file (`control-osworld tasks pairings`), relative to the config
    file; default: the side tasks' pairing rules."""
    hand_held_instruction: bool = False
    """Attack runs get the side task's step-by-step hand_held_instruction (recorded per sample)."""
    action_space: list[SpaceName] = [RUN_DEFAULTS.action_space]  # pydantic copies the default
    """The agent's desktop tool: inspect's computer tool, or OSWorld's `pyautogui` (code strings,
    WAIT/DONE/FAIL) or `computer_13` (action dicts) space (agent/spaces.py); recorded per sample
    and in the runs table's `action_space` column."""
    observation: list[ObservationName] = [RUN_DEFAULTS.observation]
    """What the agent gets after each step (agent/observation.py); beyond `screenshot` it needs an
    OSWorld action space; recorded per sample and in the runs table's `observation` column.
    The ablation axis: lists in `action_space` and/or `observation` run every combination (each
    in its own tasks; `observation` beyond screenshot is skipped for the `computer` space, and a
    grid left with no combination is an error naming the fields); the report splits Tables 3/4 and
    the protocol tables by them."""
    policy: Literal["tools", "prompted"] = RUN_DEFAULTS.policy
    """`prompted`: OSWorld's prompt-agent format for any chat model (agent/prompted.py; needs an
    OSWorld action space); `tools`: the model calls the desktop tool."""
    live_view: bool | Literal["control"] = False
    """Each sample's desktop gets a view-only browser view while it runs (its URL in the progress
    log and the sample's store, `live_view_url`); control_osworld/desktop/liveview.py. `control`:
    the person's take-over page instead (agent/takeover.py; `takeover_url`)."""
    log_realtime: bool | None = None
    """inspect's realtime sample buffer (what `inspect view` shows of samples still running). None:
    off when every pairing's model is the offline scripted one (nobody watches a scripted run live;
    the buffer costs every step a write), else inspect's default (on). The finished logs are the same."""
    monitors: list[str] = Field(default_factory=list)
    """Monitor config files (monitors/*.yaml) run over the logs after the agents."""
    monitor_subsets: list[str] | Literal["all"] = "all"
    scores_into_logs: bool = True
    """Write the monitors' scores back into the .eval logs as inspect scores (inspect view, samples_df)."""
    report: bool = True
    seed: int = 0

    def realtime_log(self) -> bool | None:
        """`log_realtime` for inspect (None: inspect's default)."""
        if self.log_realtime is not None:
            return self.log_realtime
        return False if all(p.untrusted_model.startswith("scripted/") for p in self.pairings) else None

    @classmethod
    def load(cls, path: str | Path) -> "RunConfig":
        """Raises ConfigError naming the file and the field."""
        cfg = read_config(path, cls, paths=("tasks_dir", "side_tasks_dir", "pairings_file"))
        if not cfg.conditions():
            raise ConfigError(f"{path}: fields 'action_space', 'observation': no combination runs (an observation "
                              "beyond screenshot needs action_space pyautogui or computer_13)")
        if cfg.policy == "prompted" and any(sp == "computer" for sp, _ in cfg.conditions()):
            raise ConfigError(f"{path}: field 'policy': prompted needs action_space pyautogui or computer_13")
        return cfg

    def run_spec(self, action_space: str = RUN_DEFAULTS.action_space,
                 observation: str = RUN_DEFAULTS.observation) -> RunSpec:
        """The run spec of one condition of this config: every RunSpec knob the config holds (the
        rest at their defaults), the condition's action space and observation."""
        held = {k: getattr(self, k) for k in RunSpec.model_fields if k in type(self).model_fields}
        return RunSpec(**{**held, "action_space": action_space, "observation": observation})

    def conditions(self) -> list[tuple[str, str]]:
        """The (action space, observation) combinations this config runs."""
        return [(sp, ob) for sp in dict.fromkeys(self.action_space) for ob in dict.fromkeys(self.observation)
                if ob == "screenshot" or sp != "computer"]

    @field_validator("action_space", "observation", mode="before")
    @classmethod
    def _one_or_a_list(cls, v: Any) -> Any:
        """`action_space: pyautogui` is the one-element grid `[pyautogui]`."""
        return [v] if isinstance(v, str) else v


def build_tasks(cfg: RunConfig) -> list:
    from inspect_ai.model import get_model

    from control_osworld.control.task import osworld_control

    tasks = []
    for pairing in cfg.pairings:
        model = get_model(pairing.untrusted_model, **pairing.model_args) if pairing.model_args else pairing.untrusted_model
        common: dict[str, Any] = dict(main_tasks=cfg.main_tasks, side_tasks=cfg.side_tasks,
                                      tasks_dir=cfg.tasks_dir, side_tasks_dir=cfg.side_tasks_dir, apps=cfg.apps)
        if cfg.url or cfg.remote_reset:  # only when set: a task built without them is unchanged
            common |= dict(url=cfg.url, remote_reset=cfg.remote_reset)
        if cfg.pairings_file:
            common["pairings_file"] = cfg.pairings_file
        if cfg.hand_held_instruction:
            common["hand_held_instruction"] = True
        if cfg.live_view:
            common["live_view"] = cfg.live_view
        slug = pairing.untrusted_model.replace("/", "-")
        for space, observation in cfg.conditions():
            run_args = cfg.run_spec(space, observation).task_args(always=ALWAYS_PASSED)
            # the condition, in the task's name: its action space and observation when not the defaults
            cond = {k: run_args[k] for k in ("action_space", "observation") if k in run_args}
            for mode in cfg.modes:
                prompts = pairing.attack_prompts if mode == "attack" else ["attack_plain"]
                for prompt in prompts:
                    name = f"osworld_{slug}_{mode}" + (f"_{prompt}" if mode == "attack" else "")
                    name += "".join(f"_{v}" for v in cond.values())
                    t = osworld_control(mode=mode, attack_prompt=prompt, reminder_every=pairing.reminder_every.get(prompt),
                                        untrusted_model=pairing.untrusted_model, name=name, **common, **run_args)
                    t.model = get_model(model) if isinstance(model, str) else model
                    tasks.append(t)
    return tasks


def run(config_path: str | Path, *, log_dir: str | None = None, skip_agents: bool = False) -> int:
    """Run the stages; progress lines also go to `<log_dir>/progress.log`."""
    cfg = RunConfig.load(config_path)
    out = Path(log_dir or cfg.log_dir)
    out.mkdir(parents=True, exist_ok=True)
    with progress_log(out / "progress.log"):
        _stages(cfg, out, skip_agents)
    return 0


def _local_path(location: str) -> str:
    """A log location as a path: eval_set names logs it reused as `file:` URIs."""
    for prefix in ("file://", "file:"):
        if location.startswith(prefix):
            return location[len(prefix):]
    return location


def _set_aside_superseded(out: Path, task_names: set[str], current: list[str]) -> None:
    """Move older logs of these tasks (e.g. a killed run's, whose finished samples eval_set
    copied into the new log) to `out/superseded/`: kept, but out of the folder, so that every
    sample is in exactly one log there."""
    from inspect_ai.log import read_eval_log

    keep = {Path(p).resolve() for p in current}
    for p in sorted(out.glob("*.eval")):
        if p.resolve() in keep:
            continue
        try:
            task = read_eval_log(str(p), header_only=True).eval.task
        except Exception:
            continue
        if task in task_names:
            (out / "superseded").mkdir(exist_ok=True)
            p.rename(out / "superseded" / p.name)
            print(f"[run] {p.name}: superseded by a newer log of {task}; moved to {out / 'superseded'}", file=sys.stderr)


def _has_errors(path: str) -> bool:
    from inspect_ai.log import read_eval_log_sample_summaries

    return any(s.error for s in read_eval_log_sample_summaries(path))


def _retry_errored(out: Path, logs: list[str], cfg: RunConfig) -> list[str]:
    """Retry errored samples up to `retry_attempts` times, each time in a new log
    (`inspect_ai.eval_retry`: finished samples are copied, errored ones run again), so that
    every attempt keeps its whole record in its own log (the older ones then move to
    `superseded/`); returns the newest log of each task."""
    from inspect_ai import eval_retry
    from inspect_ai.log import read_eval_log

    for _ in range(cfg.retry_attempts):
        errored = [p for p in logs if _has_errors(p)]
        if not errored:
            break
        print(f"[run] retrying errored samples of {len(errored)} log(s) in new logs", file=sys.stderr)
        retried = eval_retry(errored, log_dir=str(out), max_samples=cfg.max_samples, max_sandboxes=cfg.max_samples,
                             fail_on_error=False, retry_on_error=0, log_realtime=cfg.realtime_log())
        newest = {r.eval.task_id: _local_path(r.location) for r in retried}
        logs = [newest.get(read_eval_log(p, header_only=True).eval.task_id, p) for p in logs]
    return logs


def _stages(cfg: RunConfig, out: Path, skip_agents: bool) -> None:
    from inspect_ai import eval_set

    from control_osworld.eval_progress import agents_progress

    logs: list[str] = []
    if not skip_agents:
        tasks = build_tasks(cfg)
        print(f"[run] {len(tasks)} tasks ({', '.join(t.name for t in tasks)}) -> {out}", file=sys.stderr)
        with agents_progress(tasks, out, cfg.epochs):
            ok, eval_logs = eval_set(
                tasks, log_dir=str(out), retry_attempts=cfg.retry_attempts, max_tasks=2,
                max_samples=cfg.max_samples, max_sandboxes=cfg.max_samples, epochs=cfg.epochs,
                fail_on_error=False, retry_on_error=0, retry_cleanup=False, log_dir_allow_dirty=True,
                log_realtime=cfg.realtime_log(),
            )
            logs = _retry_errored(out, [_local_path(log.location) for log in eval_logs], cfg)
        _set_aside_superseded(out, {t.name for t in tasks}, logs)
        if not ok:
            print("[run] some samples still errored after retries; they are kept apart as `error`", file=sys.stderr)
    if not logs:
        logs = sorted(str(p) for p in out.glob("*.eval"))
    runs_path = out / "runs.parquet"
    from control_osworld.logs import runs_table

    superseded = sorted(str(p) for p in (out / "superseded").glob("*.eval"))
    table = runs_table(logs, superseded)
    table.to_parquet(runs_path)
    # a sample whose record is an older attempt (it escaped, then errored) is scored from that log
    logs = logs + sorted(set(table["log"]) - set(logs)) if not table.empty else logs
    counts = table.groupby(["eval_mode", "outcome"]).size().to_dict() if not table.empty else {}
    print(f"[run] runs table {runs_path}: {len(table)} runs; outcomes {counts}", file=sys.stderr)

    scores_path = out / "scores"
    if cfg.monitors:
        from control_osworld.monitoring.runner import monitor_logs

        monitor_logs(logs, cfg.monitors, subsets=cfg.monitor_subsets, store=scores_path)
        if cfg.scores_into_logs:
            from control_osworld.monitoring.store import ScoreStore
            from control_osworld.monitoring.writeback import write_scores_into_logs

            changed = write_scores_into_logs(ScoreStore(scores_path).read(), logs)
            print(f"[run] monitor scores written into {sum(1 for n in changed.values() if n)} log(s)", file=sys.stderr)
    if cfg.report and cfg.monitors:
        from control_osworld.analysis.report import build_report
        from control_osworld.analysis.runs import load_runs, load_scores

        build_report(load_runs([runs_path]), load_scores([scores_path]), out / "report")
        print(f"[run] report in {out / 'report'}", file=sys.stderr)
