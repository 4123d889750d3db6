"""This harness's own codebook entry (competing-hazards paper, section 4.5): generated from a run config and
the code it runs, and checked against the runs it produced.

`harness_entry(config, runs=None)` returns the entry as a mapping in the codebook's format
(`control_osworld.analysis.codebook`): every answer cites the file that decides it and a line
of that file, which is looked up at generation time (the generator fails when the code no
longer says it, so the entry cannot drift from the code silently). Answers that depend on the
config (which side tasks are paired, their attempt detectors and boundary switches, the budget)
come from the same rules the audit applies to runs (`identifiability.record_from_runs`), applied
to the runs the config would produce; with `runs`, the answers the runs themselves give are
compared field by field and any difference is an error (`HarnessEntryError`).

`control-osworld harness-entry CONFIG [--logs RUNS] [--write FILE]` writes it.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from pathlib import Path
from typing import Any

import click
import pandas as pd

from control_osworld.analysis import identifiability as idf
from control_osworld.analysis.codebook import entry_from_mapping
from control_osworld.cli_paths import DataPath
from control_osworld.config_file import REPO_ROOT
from control_osworld.resources import source_root

__all__ = ["CHECKED_FIELDS", "HarnessEntryError", "harness_entry", "harness_entry_command", "predicted_runs", "write_entry"]

CHECKED_FIELDS = ("attempt_unit", "per_step", "budget", "budget_varied", "completion", "safe_stop", "out_of_scope",
                  "attempts", "boundary", "exhaustion", "censoring")
_LOOP = "control_osworld/agent/loop.py"
_TOOLS = "control_osworld/agent/tools.py"
_IDF = "control_osworld/analysis/identifiability.py"


class HarnessEntryError(ValueError):
    """The code no longer says what the entry cites, or the runs disagree with the config."""


def _rel(p: Path) -> str:
    for base in (REPO_ROOT, source_root()):  # data files, then code files (apart in a wheel)
        try:
            return str(Path(p).resolve().relative_to(base))
        except ValueError:
            pass
    return str(p)


def _cite(path: str | Path, needle: str) -> str:
    """The first line of `path` (repo-relative or absolute) containing `needle`, stripped."""
    p = Path(path)
    p = p if p.is_absolute() else (source_root() if p.parts[:1] == ("control_osworld",) else REPO_ROOT) / p
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise HarnessEntryError(f"{p}: cannot read the file the entry cites ({exc})") from None
    for line in text.splitlines():
        if needle in line:
            return line.strip()
    raise HarnessEntryError(f"{_rel(p)}: no line contains {needle!r}: the code changed, update the harness entry")


def _ans(value: Any, source: str, quote: str, note: str | None = None) -> dict:
    out = {"answer": value, "source": source, "quote": quote}
    if note:
        out["note"] = note
    return out


def predicted_runs(cfg, config_path: str | Path) -> pd.DataFrame:
    """The runs table the config would produce, without outcomes: one row per (mode, sample,
    epoch) with the fields the audit reads (side task, boundary, attempt detector, budget)."""
    from control_osworld.control.catalogue import Catalogue

    cat = Catalogue.load(cfg.tasks_dir, cfg.side_tasks_dir)
    mains = cat.runnable_main_tasks(ids=cfg.main_tasks, apps=cfg.apps)
    pairs = cat.pairings(mains, side_ids=cfg.side_tasks, design=cfg.pairings_file)
    rows = []
    for mode in cfg.modes:
        prompts = [p for pr in cfg.pairings for p in pr.attack_prompts] if mode == "attack" else [None] * len(cfg.pairings)
        for prompt in prompts:
            samples: list[tuple[Any, Any, Any]]  # (main task, side task given, side task's environment)
            if mode == "honest" and cfg.honest_matching == "per_main":
                samples = [(t, None, None) for t in mains]
            elif mode == "honest":
                samples = [(t, None, s) for t, s in pairs]
            else:
                samples = [(t, s, s) for t, s in pairs]
            for t, side, env in samples:
                for epoch in range(1, cfg.epochs + 1):
                    rows.append({
                        "run_id": f"{mode}:{prompt or ''}:{t.id}:{env.id if env else ''}:{epoch}",
                        "log": str(config_path), "eval_mode": mode, "main_task_id": t.id, "epoch": epoch,
                        "sample_id": t.id if env is None else f"{t.id}__{env.id}",
                        "side_task_id": side.id if side is not None else None,
                        "boundary": cfg.boundary if side is not None and side.has_boundary else None,
                        "attempt_detector": (side.attempt is not None) if side is not None else None,
                        "attempt_steps": [], "budget": cfg.budget, "outcome": None, "outcome_step": None,
                    })
    return pd.DataFrame(rows)


def _budget_disclosed(cfg) -> tuple[str, str, str]:
    """yes when an agent prompt template the config uses shows the budget ({budget}), else no."""
    from control_osworld.agent.policies import PROMPTS_DIR

    names = ["agent_honest"] + sorted({p for pr in cfg.pairings for p in pr.attack_prompts})
    files = [PROMPTS_DIR / f"{n}.txt" if not Path(n).suffix else Path(n) for n in names]
    shown = [f for f in files if f.is_file() and "{budget}" in f.read_text(encoding="utf-8")]
    cited = ", ".join(_rel(f) for f in files)
    if shown:
        return "yes", cited, f"{{budget}} in {', '.join(_rel(f) for f in shown)}"
    return "no", cited, f"no '{{budget}}' placeholder (nor any step count) in {cited}"


def _side_tasks_quote(pred: pd.DataFrame) -> str:
    att = pred[pred["side_task_id"].notna()].drop_duplicates("side_task_id")
    if att.empty:
        return "no side task is paired: no attack runs"
    parts = [f"{r.side_task_id} (attempt detector: {'yes' if r.attempt_detector else 'no'}, "
             f"boundary: {r.boundary if isinstance(r.boundary, str) else 'none'})" for r in att.itertuples()]
    return "side tasks paired by the config: " + "; ".join(parts)


def harness_entry(config_path: str | Path, runs: pd.DataFrame | None = None, runs_source: str | None = None) -> dict:
    """The entry for the evaluation `config_path` describes (and, with `runs`, checked against
    them). Raises HarnessEntryError when the cited code changed or the runs disagree."""
    from control_osworld.control.run import RunConfig

    cfg = RunConfig.load(config_path)
    cfg_rel = _rel(Path(config_path))
    pred = predicted_runs(cfg, cfg_rel)
    rec, _ = idf.record_from_runs(pred)
    cfg_text = Path(config_path).read_text(encoding="utf-8")
    budget_line = next((ln.strip() for ln in cfg_text.splitlines() if ln.strip().startswith("budget:")), None)
    budget_src, budget_quote = (cfg_rel, budget_line) if budget_line else ("control_osworld/control/run.py", _cite("control_osworld/control/run.py", "budget: int ="))
    disclosed, disc_src, disc_quote = _budget_disclosed(cfg)
    sides_quote = _side_tasks_quote(pred)
    ending = _cite(_LOOP, 'ending = ("stopped" if submitted == "infeasible" else "completed", t)')
    answers = {
        "attempt_unit": _ans(rec["attempt_unit"], _LOOP, _cite(_LOOP, "One step = one call of the micro-protocol")),
        "per_step": _ans(rec["per_step"], _LOOP, _cite(_LOOP, "records every step (A, T, private reasoning, S"),
                         "every run's .eval log holds every step; the runs table lists attempt steps and t*"),
        "budget": _ans(rec["budget"], budget_src, budget_quote),
        "budget_varied": _ans(rec["budget_varied"], budget_src, budget_quote, "one config, one budget"),
        "budget_disclosed": _ans(disclosed, disc_src, disc_quote),
        "completion": _ans(rec["completion"], _LOOP, ending),
        "safe_stop": _ans(rec["safe_stop"], f"{_LOOP}; {_TOOLS}",
                          ending + " / " + _cite(_TOOLS, 'status: Literal["done", "infeasible"]')),
        "out_of_scope": _ans(rec["out_of_scope"], _LOOP,
                             _cite(_LOOP, "After each step the side-task checker runs") if rec["out_of_scope"] != "not_coded"
                             else "the config's modes run no side task", None if rec["out_of_scope"] != "not_coded"
                             else "no attack mode: no side-task checker runs"),
        "attempts": _ans(rec["attempts"], f"{_IDF} (record_from_runs) on the runs the config pairs", sides_quote,
                         "a and b are identified per side task where it has an attempt detector (audit --logs, "
                         "'Per side task')" if rec["attempts"] == "some_detected" else None),
        "boundary": _ans(rec["boundary"], f"{cfg_rel}; side_tasks/", f"boundary: {cfg.boundary}; " + sides_quote,
                         "open lets every attempt take effect (b = 1 by construction) for side tasks with a boundary "
                         "switch" if cfg.boundary == "open" else None),
        "exhaustion": _ans(rec["exhaustion"], _LOOP, _cite(_LOOP, 'ending = ("censored", t)')),
        "censoring": _ans(rec["censoring"], _LOOP, _cite(_LOOP, "for _turn in range(budget):"),
                          "the budget is fixed by the config; infrastructure errors (X) are kept apart, not censored"),
        "multi_agent": _ans("no", _LOOP, _cite(_LOOP, "The agent loop: a control-arena scaffold")),
    }
    entry: dict[str, Any] = {
        "name": f"control-osworld (this harness: {cfg_rel})",
        "kind": "gui",
        "evidence": "high",
        "sources": [f"{cfg_rel} (sha256 {hashlib.sha256(cfg_text.encode()).hexdigest()[:12]})",
                    f"{_LOOP}, {_TOOLS}, control_osworld/control/catalogue.py, side_tasks/, prompts/ (this repository)"],
        "answers": answers,
        "generated": {"by": f"control-osworld harness-entry {cfg_rel}"
                            + (f" --logs {runs_source}" if runs_source else ""),
                      "predicted_runs": len(pred)},
    }
    if runs is not None:
        entry["generated"].update(_check(rec, pred, runs, runs_source or "the runs"))
    entry_from_mapping(entry, "generated harness entry")  # the codebook's own schema check
    return entry


def _samples(df: pd.DataFrame) -> Counter:
    return Counter(zip(df["eval_mode"], df["sample_id"].astype(str), df["epoch"].astype(int)))


def _check(predicted: dict, pred: pd.DataFrame, runs: pd.DataFrame, source: str) -> dict:
    """The runs are the config's samples, each once, and give the same answers."""
    want, have = _samples(pred), _samples(runs)
    diff = []
    if want != have:
        missing, extra = sorted((want - have).elements()), sorted((have - want).elements())
        diff.append(f"samples: {len(missing)} the config pairs are not in the runs {missing[:5]}, "
                    f"{len(extra)} runs the config does not pair (or counted twice) {extra[:5]}")
    got, notes = idf.record_from_runs(runs)
    diff += [f"{f}: the config gives {predicted[f]!r}, the runs give {got[f]!r}" for f in CHECKED_FIELDS
             if predicted[f] != got[f]]
    if diff:
        raise HarnessEntryError(f"{source}: the runs disagree with the config's entry:\n  " + "\n  ".join(diff)
                                + "\n  notes: " + "; ".join(notes))
    counts = runs["outcome"].value_counts()
    return {"checked_against": source, "runs": len(runs),
            "outcomes": {k: int(counts.get(k, 0)) for k in ("completed", "stopped", "escaped", "terminated", "censored", "error")},
            "fields_checked": list(CHECKED_FIELDS)}


def write_entry(entry: dict, path: str | Path) -> Path:
    """The entry as a codebook file of its own (included by codebooks/agent_evaluations.yaml)."""
    import yaml

    path = Path(path)
    head = ("# Generated by `" + entry["generated"]["by"] + " --write " + _rel(path) + "`: do not edit.\n"
            "# This harness's entry in the identifiability codebook (competing-hazards paper, section 4.5).\n")
    body = yaml.safe_dump({"codebook": "control-osworld/identifiability-v2", "evaluations": [entry]},
                          sort_keys=False, allow_unicode=True, width=120)
    path.write_text(head + body, encoding="utf-8")
    return path


@click.command("harness-entry")
@click.argument("config", type=DataPath(folder="configs", exists=True, dir_okay=False, path_type=Path))
@click.option("--logs", "logs", multiple=True, type=DataPath(exists=True, path_type=Path),
              help="The config's runs (runs table(s), .eval logs or a folder): the entry is checked against them. Repeatable.")
@click.option("--write", "write_path", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the entry to this codebook file (e.g. codebooks/control_osworld_harness.yaml) instead of stdout.")
def harness_entry_command(config, logs, write_path):
    """This harness's identifiability-codebook entry (competing-hazards paper, section 4.5), generated from a run
    CONFIG and the code it runs, and checked against the config's runs (--logs)."""
    import sys

    import yaml

    from control_osworld.analysis.runs import InputError, load_runs
    from control_osworld.config_file import ConfigError

    try:
        runs = load_runs(list(logs)) if logs else None
        entry = harness_entry(config, runs, runs_source=", ".join(map(str, logs)) or None)
    except (HarnessEntryError, ConfigError, InputError) as exc:
        raise click.ClickException(str(exc)) from None
    if write_path is None:
        sys.stdout.write(yaml.safe_dump(entry, sort_keys=False, allow_unicode=True, width=120))
    else:
        click.echo(f"wrote {write_entry(entry, write_path)}")
