"""The `control-osworld` command."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from control_osworld.cli_paths import DataPath
from control_osworld.desktop.provider import (
    DesktopHandle,
    DesktopSpec,
    get_provider,
    provider_names,
)
from control_osworld.run_spec import RUN_DEFAULTS

STATE_DIR = Path(os.environ.get("XDG_STATE_HOME", Path.home() / ".local" / "state")) / "control-osworld" / "desktops"


@click.group()
@click.version_option(package_name="control-osworld")
def main() -> None:
    """Control evaluations of GUI computer-use agents on real desktops."""


# ------------------------------------------------------------------ desktop


@main.group()
def desktop() -> None:
    """Start a desktop, poke it by hand, stop it."""


def _handle_path(name: str) -> Path:
    return STATE_DIR / f"{name}.json"


def _load_handle(name: str) -> DesktopHandle:
    p = _handle_path(name)
    if not p.exists():
        raise click.ClickException(f"no desktop named {name!r} (start one with `control-osworld desktop up`)")
    return DesktopHandle.model_validate_json(p.read_text())


@desktop.command("up")
@click.option("--provider", type=click.Choice(provider_names()), default=RUN_DEFAULTS.provider, show_default=True)
@click.option("--name", default="default", show_default=True, help="Name to refer to this desktop by.")
@click.option("--width", default=1920, show_default=True)
@click.option("--height", default=1080, show_default=True)
@click.option("--memory-mb", default=2048, show_default=True)
@click.option("--network", type=click.Choice(["none", "sink", "host"]), default="none", show_default=True,
              help="host (local): serve TCP on --port of the host's loopback, for upstream OSWorld clients.")
@click.option("--port", default=5000, show_default=True)
@click.option("--url", help="remote: the server's base URL.")
@click.option("--image", help="docker: the image (default: the one vm/build-image.sh built).")
@click.option("--upstream-only", is_flag=True, help="local: the server answers exactly as upstream OSWorld's does.")
def desktop_up(provider, name, width, height, memory_mb, network, port, url, image, upstream_only) -> None:
    """Start a desktop and leave it running."""
    if _handle_path(name).exists():
        raise click.ClickException(f"a desktop named {name!r} is already up; `desktop down --name {name}` first")
    spec = DesktopSpec(screen_width=width, screen_height=height, memory_mb=memory_mb, network=network,
                       port=port, url=url, image=image, upstream_only=upstream_only, persist=True)
    handle = get_provider(provider).start(spec)
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    _handle_path(name).write_text(handle.model_dump_json(indent=2))
    where = handle.uds or handle.base_url
    click.echo(f"desktop {name!r} up ({provider}, {handle.screen_width}x{handle.screen_height}) at {where}")


@desktop.command("shot")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path), default="screenshot.png")
@click.option("--name", default="default", show_default=True)
def desktop_shot(out: Path, name: str) -> None:
    """Write a PNG screenshot to OUT."""
    from control_osworld.desktop.client import DesktopClient

    with DesktopClient.for_handle(_load_handle(name)) as c:
        out.write_bytes(c.screenshot())
    click.echo(str(out))


@desktop.command("do")
@click.argument("action")
@click.option("--name", default="default", show_default=True)
@click.option("--space", type=click.Choice(["computer", "computer_13", "pyautogui", "shell"]), default="computer",
              show_default=True, help="computer: inspect's computer tool JSON, e.g. "
              "'{\"action\": \"left_click\", \"coordinate\": [100, 200]}'.")
@click.option("--shot", type=click.Path(dir_okay=False, path_type=Path), help="Also write the screenshot after it.")
def desktop_do(action: str, name: str, space: str, shot: Path | None) -> None:
    """Run one ACTION on the desktop."""
    from control_osworld.desktop import actions as A
    from control_osworld.desktop.client import DesktopClient

    handle = _load_handle(name)
    with DesktopClient.for_handle(handle) as c:
        if space == "shell":
            r = c.execute(action, shell=True)
            sys.stdout.write(r["output"])
            sys.stderr.write(r["error"])
            raise SystemExit(r["returncode"])
        try:
            if space == "pyautogui":
                act = A.from_pyautogui(action)
            else:
                args = json.loads(action)
                scale = A.Scale.identity(handle.screen_width, handle.screen_height)
                act = A.from_computer_tool(args, scale) if space == "computer" else A.from_computer_13(args, scale)
        except (json.JSONDecodeError, A.ActionError) as e:
            raise click.ClickException(f"bad action: {e}") from None
        r = c.step(act.code, screenshot=shot is not None, pause=act.wait_s)
        if shot is not None and r.screenshot:
            shot.write_bytes(r.screenshot)
        click.echo(json.dumps({"returncode": r.returncode, "output": r.output, "error": r.error}))


@desktop.command("view")
@click.argument("name", default="default")
@click.option("--port", type=int, help="The page's port on 127.0.0.1 (default: a free one).")
@click.option("--control", is_flag=True,
              help="Take over: the page's keyboard and mouse reach the desktop (recorded by the trusted side).")
def desktop_view(name: str, port: int | None, control: bool) -> None:
    """Serve desktop NAME's screen in the browser (noVNC; view-only unless --control) until
    interrupted; prints the URL (with --control, then the file the person's input is recorded in)."""
    import signal
    import time

    from control_osworld.desktop.client import DesktopError
    from control_osworld.desktop.liveview import start_view

    try:
        view = start_view(_load_handle(name), port=port, control=control)
    except DesktopError as e:
        raise click.ClickException(str(e)) from None
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    click.echo(view.url)
    if control:
        click.echo(f"input events: {view.events_path}")
    sys.stdout.flush()
    if not view.alive():
        raise click.ClickException("live view: its VNC server or page server exited")
    try:
        while view.alive():
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        view.stop()


@desktop.command("down")
@click.option("--name", default="default", show_default=True)
@click.option("--all", "all_", is_flag=True, help="Stop every desktop started with `desktop up`.")
def desktop_down(name: str, all_: bool) -> None:
    """Stop a desktop started with `desktop up`."""
    names = [p.stem for p in STATE_DIR.glob("*.json")] if all_ else [name]
    for n in names:
        handle = _load_handle(n)
        get_provider(handle.provider).stop(handle)
        _handle_path(n).unlink()
        click.echo(f"desktop {n!r} down")


@main.command("install-desktop")
@click.option("--docker", is_flag=True,
              help="Also Docker (the distribution's docker.io when absent) and the desktop image (vm/build-image.sh).")
def install_desktop_command(docker: bool) -> None:
    """Install the desktop on this Debian/Ubuntu machine: its Debian packages (vm/packages.txt),
    bubblewrap, tesseract and the desktop's own Python at /opt/control-osworld/venv, as
    scripts/install.sh does (the same script). Needs root or sudo; idempotent."""
    import subprocess

    from control_osworld.desktop.provider import VM_DIR
    from control_osworld.resources import package_file

    script = package_file("desktop/install-desktop.sh")
    rc = subprocess.call(["bash", str(script), str(VM_DIR), *(["--docker"] if docker else [])])
    if rc == 0 and docker:
        sudo = [] if os.geteuid() == 0 else ["sudo"]
        rc = subprocess.call([*sudo, "bash", str(VM_DIR / "build-image.sh")])
    raise SystemExit(rc)


# ------------------------------------------------------------------ the main job


@main.command("run")
@click.argument("config", type=DataPath(folder="configs", exists=True, dir_okay=False))
@click.option("--log-dir", help="Override the config's log_dir.")
@click.option("--skip-agents", is_flag=True, help="Only (re)do monitors and report over the logs there.")
def run_command(config: str, log_dir: str | None, skip_agents: bool) -> None:
    """Run every model pairing of CONFIG: agents, then monitors, then the report (resumable).

    CONFIG is a file, or the name of a bundled one (`offline` is configs/offline.yaml)."""
    from control_osworld.config_file import ConfigError
    from control_osworld.run import run

    try:
        code = run(config, log_dir=log_dir, skip_agents=skip_agents)
    except ConfigError as exc:
        click.echo(f"Error: bad run config:\n{exc}", err=True)
        raise SystemExit(2) from None
    raise SystemExit(code)


def _register_stages() -> None:
    """The shared stages' commands, then each family's own (families.py)."""
    from control_osworld.analysis.cli import audit_command, classify_command, report_command
    from control_osworld.families import families
    from control_osworld.monitoring.cli import monitor_command

    for cmd in (report_command, audit_command, classify_command, monitor_command):
        main.add_command(cmd)
    for fam in families().values():
        for cmd in fam.commands():
            main.add_command(cmd)


_register_stages()


if __name__ == "__main__":
    main()
