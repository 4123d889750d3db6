"""`control-osworld proactivity ...`: the dilemma scenario engine's commands."""

from __future__ import annotations

from pathlib import Path

import click

from control_osworld.cli_paths import DataPath

__all__ = ["proactivity_group"]


@click.group("proactivity")
def proactivity_group() -> None:
    """Dilemma scenarios (toxic proactivity): render, validate, generate."""


@proactivity_group.command("pack")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder to write (default: the bundled scenarios/pack).")
@click.option("--templates", type=DataPath(exists=True, dir_okay=False, path_type=Path), default=None)
def pack_command(out: Path | None, templates: Path | None) -> None:
    """Render the scenario pack in template mode (deterministic, no model)."""
    from control_osworld.proactivity.scenario import ScenarioError
    from control_osworld.proactivity.templates import PACK_DIR, TEMPLATES, write_pack

    try:
        paths = write_pack(out or PACK_DIR, templates or TEMPLATES)
    except ScenarioError as e:
        raise click.ClickException(str(e)) from None
    click.echo(f"wrote {len(paths)} scenarios to {out or PACK_DIR}")


@proactivity_group.command("validate")
@click.argument("paths", nargs=-1, required=True, type=DataPath(exists=True, path_type=Path))
def validate_command(paths) -> None:
    """Check scenario files (or folders of them) against the schema and the six-tool invariants."""
    from control_osworld.proactivity.scenario import ScenarioError, load_scenarios

    bad = 0
    for p in paths:
        files = sorted(p.glob("*.yaml")) if p.is_dir() else [p]
        for f in files:
            try:
                load_scenarios(f)
                click.echo(f"ok   {f}")
            except ScenarioError as e:
                bad += 1
                click.echo(f"FAIL {e}", err=True)
    if bad:
        raise SystemExit(1)


@proactivity_group.command("generate")
@click.argument("config", type=DataPath(folder="configs", exists=True, dir_okay=False))
def generate_command(config: str) -> None:
    """Generate scenarios with the generator/discriminator models of CONFIG (four stages, audited)."""
    from control_osworld.config_file import ConfigError
    from control_osworld.proactivity.generate import GenerateConfig, run_generation

    try:
        cfg = GenerateConfig.load(config)
    except ConfigError as exc:
        click.echo(f"Error: bad generation config:\n{exc}", err=True)
        raise SystemExit(2) from None
    log = run_generation(cfg)
    n = len(log.samples or [])
    ok = sum(1 for s in log.samples or [] if s.scores and next(iter(s.scores.values())).answer == "accepted")
    click.echo(f"{ok}/{n} scenarios accepted -> {cfg.out_dir} (audit in {cfg.out_dir}/audit, log {log.location})")
