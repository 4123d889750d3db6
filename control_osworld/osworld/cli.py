"""`control-osworld tasks list | validate | check TASK_ID | pairings [--generate] | author MAIN_TASK_ID | fetch-assets [PATHS] | export-assets DEST |
import-assets SRC | verify-assets | coverage PATH`; `tasks play-pairings` is the control family's
(control/pairing_check.py: it plays the scripted model's plans)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import click

from control_osworld.cli_paths import DataPath
from control_osworld.run_spec import RUN_DEFAULTS


def _load(tasks_dir: str | None, side_dir: str | None):
    from control_osworld.osworld.loader import load_side_tasks, load_tasks

    return load_tasks(tasks_dir), load_side_tasks(side_dir)


def _main_oracle(task_id: str, tasks_dir: str | None):
    """A main task's oracle: `oracles/<id>.json` in the tasks folder given, else the checkout's."""
    from control_osworld.osworld.oracle import load_oracle, oracle_path

    return load_oracle(oracle_path(task_id, root=Path(tasks_dir) if tasks_dir else None))


def _side_folder(side) -> Path | None:
    """The folder of a side task's file, where its `oracles/` are (None: the checkout's side_tasks/)."""
    from control_osworld.osworld.loader import source_path

    return source_path(side.file).parent if side.file else None


def _side_oracle(side):
    """A side task's oracle: `oracles/<id>.json` beside its file."""
    from control_osworld.osworld.oracle import load_oracle, oracle_path

    return load_oracle(oracle_path(side.id, side=True, root=_side_folder(side)), side=True)


@click.group("tasks")
def tasks_group() -> None:
    """Main tasks and side tasks: list, validate, check on a desktop."""


_dirs = [
    click.option("--tasks-dir", default=None, help="Main tasks folder (default: the repository's tasks/)."),
    click.option("--side-dir", default=None, help="Side tasks folder (default: the repository's side_tasks/)."),
]


def _with_dirs(f):
    for opt in reversed(_dirs):
        f = opt(f)
    return f


@tasks_group.command("list")
@_with_dirs
@click.option("--json", "as_json", is_flag=True, help="One JSON object per task.")
@click.option("--kind", type=click.Choice(["all", "main", "side"]), default="all", show_default=True)
def list_cmd(tasks_dir, side_dir, as_json, kind) -> None:
    """List main and side tasks (runnable or not, and why)."""
    tasks, sides = _load(tasks_dir, side_dir)
    rows = []
    if kind in ("all", "main"):
        for t in tasks:
            rows.append({"id": t.id, "kind": "main", "app": t.app, "infeasible": t.infeasible,
                         "runnable": t.runnable, "reason": t.reason})
    if kind in ("all", "side"):
        from control_osworld.osworld.loader import side_task_blockers

        for s in sides:
            blockers = side_task_blockers(s, tasks)
            rows.append({"id": s.id, "kind": "side", "category": s.category, "infeasible": False,
                         "runnable": not blockers, "reason": "; ".join(blockers),
                         "boundary": s.boundary is not None, "attempt_detector": s.attempt is not None,
                         "category_known": s.category_known, "hand_held_instruction": bool(s.hand_held_instruction)})
    if as_json:
        for r in rows:
            click.echo(json.dumps(r))
    else:
        for r in rows:
            where = r.get("app") or r.get("category")
            flags = " infeasible" if r["infeasible"] else ""
            flags += "" if r["runnable"] else f" UNSUPPORTED: {r['reason']}"
            click.echo(f"{r['kind']:4}  {where:20}  {r['id']}{flags}")
        n_main = sum(1 for r in rows if r["kind"] == "main")
        click.echo(f"{n_main} main tasks, {len(rows) - n_main} side tasks", err=True)
    for e in [*tasks.errors, *sides.errors]:
        click.echo(f"error: {e}", err=True)
    for w in [*tasks.warnings, *sides.warnings]:
        click.echo(f"warning: {w}", err=True)


def side_oracle_problems(side) -> list[str]:
    """What is wrong with a side task's oracle, decoys and near misses (side_tasks/README.md):
    each listed oracle exists, loads and names the side task; the oracle and the decoys have an
    effect_step, near misses none; no oracle is listed twice."""
    from control_osworld.osworld.loader import TaskFileError
    from control_osworld.osworld.oracle import load_oracle, oracle_path

    problems = []
    ids = [i for i, _ in side.variants]
    problems += [f"side task {side.id}: oracle {i!r} is listed twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    root = _side_folder(side)
    for n, (oid, kind) in enumerate(side.variants):
        field = {"oracle": "", "decoy": f"decoys[{side.decoys.index(oid)}]" if oid in side.decoys else "",
                 "near_miss": f"near_misses[{n - 1 - len(side.decoys)}].oracle"}[kind]
        what = f"side task {side.id}" + (f", {field}" if field else "")
        try:
            o = load_oracle(oracle_path(oid, side=True, root=root), side=True)
        except TaskFileError as e:
            problems.append(f"{what}: {e}")
            continue
        if o.task_id != side.id:
            problems.append(f"{what}: oracle {oid}'s task_id is {o.task_id!r}, not {side.id!r}")
        if kind == "near_miss" and o.effect_step is not None:
            problems.append(f"{what}: near miss {oid} has an effect_step (a near miss has no effect)")
        if kind != "near_miss" and o.effect_step is None:
            problems.append(f"{what}: oracle {oid}: effect_step is missing")
    return problems


@tasks_group.command("validate")
@_with_dirs
@click.option("--oracles/--no-oracles", default=True, show_default=True, help="Also check every oracle file.")
def validate_cmd(tasks_dir, side_dir, oracles) -> None:
    """Load every task and side task (and oracle); report each problem with its file and field."""
    from control_osworld.osworld.loader import TaskFileError

    tasks, sides = _load(tasks_dir, side_dir)
    problems = [str(e) for e in [*tasks.errors, *sides.errors]]
    if oracles:
        for t in tasks:
            if not t.runnable:
                continue
            try:
                o = _main_oracle(t.id, tasks_dir)
                if o.task_id != t.id:
                    problems.append(f"oracle of {t.id}: task_id is {o.task_id!r}")
                if t.infeasible and o.submit != "infeasible":
                    problems.append(f"oracle of {t.id}: an infeasible task's oracle must submit infeasible")
                if o.uses_bash and not t.allows_bash:
                    problems.append(f"oracle of {t.id}: uses bash, but the task does not allow it")
            except TaskFileError as e:
                problems.append(str(e))
        for s in sides:
            problems += side_oracle_problems(s)
        from control_osworld.osworld.loader import side_task_blockers

        problems += [f"side task {s.id}: {b}" for s in sides if s.runnable for b in side_task_blockers(s, tasks)]
    for p in problems:
        click.echo(f"error: {p}", err=True)
    for w in [*tasks.warnings, *sides.warnings]:
        click.echo(f"warning: {w}", err=True)
    n_unsup = sum(1 for t in [*tasks, *sides] if not t.runnable)
    click.echo(f"{len(tasks)} main tasks, {len(sides)} side tasks loaded ({n_unsup} unsupported), "
               f"{len(problems)} problems")
    if problems:
        sys.exit(1)


@tasks_group.command("check")
@click.argument("task_id")
@_with_dirs
@click.option("--main", "main_id", default=None, help="Side tasks: the main task to pair with (default: the first).")
@click.option("--boundary", type=click.Choice(["open", "closed"]), default=None,
              help="Side tasks with a boundary switch: which side of it to check.")
@click.option("--provider", default=RUN_DEFAULTS.provider, show_default=True)
@click.option("--screenshots", type=click.Path(file_okay=False), default=None,
              help="Save screenshots after setup and after the oracle here.")
def check_cmd(task_id, tasks_dir, side_dir, main_id, boundary, provider, screenshots) -> None:
    """Run TASK_ID's oracle on a fresh desktop: doing nothing must score 0, the oracle 1
    (infeasible: submitting infeasible 1, done 0); side tasks: t* must equal the oracle's
    effect step (boundary closed: no effect, the attempt recorded)."""
    from control_osworld.osworld.loader import pairings
    from control_osworld.osworld.verify import verify_side, verify_task

    tasks, sides = _load(tasks_dir, side_dir)
    shots = Path(screenshots) if screenshots else None
    by_task, by_side = tasks.by_id(), sides.by_id()
    if task_id in by_task:
        t = by_task[task_id]
        if not t.runnable:
            raise click.ClickException(f"{task_id} is not runnable here: {t.reason}")
        v = asyncio.run(verify_task(t, _main_oracle(task_id, tasks_dir), provider=provider, shots=shots))
    elif task_id in by_side:
        s = by_side[task_id]
        mains = [m for m, _ in pairings(tasks, [s])]
        if s.main_task_id in by_task:  # the side task's own main task first
            mains = [by_task[s.main_task_id]] + [m for m in mains if m.id != s.main_task_id]
        if main_id:
            mains = [m for m in mains if m.id == main_id] or [by_task[main_id]]
        if not mains:
            raise click.ClickException(f"side task {task_id} pairs with no runnable main task")
        v = asyncio.run(verify_side(s, mains[0], _side_oracle(s), boundary=boundary,
                                    provider=provider, shots=shots))
    else:
        raise click.ClickException(f"no task or side task {task_id!r}")
    click.echo(v.summary())
    if not v.ok:
        sys.exit(1)


@tasks_group.command("fetch-assets")
@click.argument("paths", nargs=-1, type=DataPath(exists=True))
@click.option("--timeout", default=120.0, show_default=True, help="Seconds per download.")
@click.option("--from", "source", type=click.Path(exists=True), default=None,
              help="First import an export another machine made (a folder or archive of export-assets).")
@click.option("--no-network", is_flag=True, help="Never download: what is not in the cache (or --from) fails.")
def fetch_assets_cmd(paths, timeout, source, no_network) -> None:
    """Download every http(s) URL the task files under PATHS need (`download` setup steps,
    `cloud_file` getters) into the content-addressed asset cache, so that they run offline.
    With --from, fill the cache from another machine's export first (verified by hash), so a
    cluster fetches once. PATHS: task files or folders (default: tasks/ and side_tasks/).
    Ends with one JSON line."""
    from control_osworld.osworld import assets
    from control_osworld.osworld.loader import REPO

    imported = None
    if source is not None:
        imported = _import(source)

    roots = list(paths) or [str(REPO / "tasks"), str(REPO / "side_tasks")]
    needs: dict[str, list[assets.AssetNeed]] = {}
    unreadable = []
    for f, doc in assets.task_documents(roots):
        if not isinstance(doc, dict):
            unreadable.append(f"{f}: {doc}")
            continue
        for n in assets.asset_needs(doc, str(f)):
            needs.setdefault(n.url, []).append(n)
    fetched = cached = 0
    failed = []
    for url, uses in needs.items():
        try:
            if no_network:
                blob = assets.require_download(url)
                new = False
            else:
                blob, new = assets.fetch_url(url, timeout=timeout)
        except Exception as e:  # one URL's failure never stops the others
            where = "; ".join(f"{n.file}: {n.field}" for n in uses[:3]) + (" ..." if len(uses) > 3 else "")
            failed.append({"url": url, "error": f"{type(e).__name__}: {e}", "needed_by": where})
            click.echo(f"FAILED {url} ({where}): {type(e).__name__}: {e}", err=True)
            continue
        fetched += new
        cached += not new
        click.echo(f"{'fetched' if new else 'cached '} {url} -> {blob}")
    for u in unreadable:
        click.echo(f"error: {u}", err=True)
    out = {"urls": len(needs), "fetched": fetched, "already_cached": cached, "failed": len(failed),
           "cache": str(assets.downloads_dir()), "failures": failed}
    if imported is not None:
        out["imported"] = imported.as_json()
    click.echo(json.dumps(out))
    if failed or (imported is not None and imported.refused):
        sys.exit(1)


def _import(source: str):
    from control_osworld.osworld import asset_share

    try:
        rep = asset_share.import_cache(source)
    except asset_share.AssetShareError as e:
        raise click.ClickException(str(e)) from None
    for p in rep.refused:
        click.echo(f"REFUSED {p}", err=True)
    return rep


@tasks_group.command("export-assets")
@click.argument("dest", type=click.Path())
def export_assets_cmd(dest) -> None:
    """Write the download cache to DEST (a folder, or a .tar/.tar.gz/.tgz archive) for another
    machine's `import-assets` / `fetch-assets --from`. Blobs that do not verify by hash are
    refused and named. Ends with one JSON line."""
    from control_osworld.osworld import asset_share, assets

    rep = asset_share.export_cache(dest)
    for p in rep.refused:
        click.echo(f"REFUSED {p}", err=True)
    click.echo(json.dumps({"dest": str(dest), "cache": str(assets.downloads_dir()), **rep.as_json()}))
    if rep.refused:
        sys.exit(1)


@tasks_group.command("import-assets")
@click.argument("source", type=click.Path(exists=True))
def import_assets_cmd(source) -> None:
    """Fill the download cache from SOURCE, another machine's `export-assets` (folder or
    archive). Each blob is checked against the manifest's sha256 and size; a corrupt or
    swapped one is refused, naming it, and the others still import. Ends with one JSON line."""
    from control_osworld.osworld import assets

    rep = _import(source)
    click.echo(json.dumps({"source": str(source), "cache": str(assets.downloads_dir()), **rep.as_json()}))
    if rep.refused:
        sys.exit(1)


@tasks_group.command("verify-assets")
def verify_assets_cmd() -> None:
    """Check every cached download against its hash; each problem names its file."""
    from control_osworld.osworld import asset_share, assets

    problems = asset_share.verify_cache()
    for p in problems:
        click.echo(f"CORRUPT {p}", err=True)
    click.echo(json.dumps({"cache": str(assets.downloads_dir()), "entries": len(asset_share.local_entries()),
                           "problems": len(problems)}))
    if problems:
        sys.exit(1)


@tasks_group.command("coverage")
@click.argument("path", type=DataPath(exists=True, file_okay=False))
@click.option("--records", "records_file", type=click.Path(dir_okay=False), default=None,
              help="Also write one JSON line per task: status, blocking reasons, and for the tasks that run "
                   "here which evaluator functions they use, each ours-exact or ours-approximate (and how).")
def coverage_cmd(path, records_file) -> None:
    """Per domain (sub-folder) of the task set at PATH (e.g. upstream OSWorld's
    evaluation_examples/examples): files, how many load, are runnable offline now, need only
    cached assets, need an app / evaluator / the live web we lack (and which), and of the tasks
    that run here how many score with ours-exact functions only, with an ours-approximate one,
    with an agent-shaped verdict. A table, then one JSON line."""
    from control_osworld.osworld.coverage import coverage, summary_json, table

    rows = coverage(path)
    if records_file:
        from control_osworld.osworld.coverage import records

        with open(records_file, "w") as f:
            for rec in records(path):
                f.write(json.dumps(rec) + "\n")
    click.echo(table(rows))
    click.echo(summary_json(rows))


@tasks_group.command("pairings")
@_with_dirs
@click.option("--file", "path", type=click.Path(dir_okay=False), default=None,
              help="The pairings file (default: the repository's side_tasks/pairings.yaml).")
@click.option("--generate", is_flag=True, help="Write the file from the side tasks' pairing rules first.")
@click.option("--k", type=int, default=1, show_default=True, help="--generate: every side task in at least k pairings.")
@click.option("--per-side", type=int, default=None, help="--generate: at most this many main tasks per side task.")
@click.option("--category", "categories", multiple=True,
              help="--generate: only these side-task categories (default: all but the on-request ones).")
@click.option("--name", default="default", show_default=True, help="--generate: the design's name.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per pairing, then the summary.")
def pairings_cmd(tasks_dir, side_dir, path, generate, k, per_side, categories, name, as_json) -> None:
    """Print and check the pairings file (main task x side task, with the reason each pair is
    plausible): unknown ids, duplicates, balance (every side task in at least k pairings, every
    main task in at least one, unless listed as unpaired with a reason). Each problem names the
    file and the entry; exit 1 if there is any. --generate writes it from the rules first."""
    from control_osworld.config_file import ConfigError
    from control_osworld.osworld import design as dz

    tasks, sides = _load(tasks_dir, side_dir)
    p = Path(path) if path else dz.DEFAULT_FILE
    if generate:
        d = dz.generate(tasks, sides, k=k, categories=categories or None, per_side=per_side, name=name)
        dz.write_design(d, p)
        click.echo(f"wrote {p}", err=True)
    try:
        d = dz.load_design(p)
    except ConfigError as e:
        raise click.ClickException(str(e)) from None
    shown = _shown(p)
    problems = dz.check(d, shown, tasks, sides)
    if as_json:
        for pr in d.pairings:
            click.echo(json.dumps(pr.model_dump()))
    else:
        w = max((len(pr.main) for pr in d.pairings), default=4)
        for pr in d.pairings:
            click.echo(f"{pr.main:{w}}  x  {pr.side:30}  {pr.reason}")
        for u in d.unpaired_mains:
            click.echo(f"{u.id:{w}}  x  {'(no side task)':30}  {u.reason}")
        for u in d.unpaired_sides:
            click.echo(f"{'(no main task)':{w}}  x  {u.id:30}  {u.reason}")
    for pr_ in problems:
        click.echo(f"error: {pr_}", err=True)
    click.echo(json.dumps({"file": shown, **dz.design_summary(d), "problems": len(problems)}))
    if problems:
        sys.exit(1)


def _shown(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _register_author() -> None:
    from control_osworld.osworld.authoring.cli import author_cmd

    tasks_group.add_command(author_cmd)


_register_author()
