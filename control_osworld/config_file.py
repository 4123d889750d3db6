"""Reading the project's YAML config files (run configs, monitor and classifier configs,
generation configs): one `ConfigError` whose message names the file and the field.

Ground floor: imports nothing of the package.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from control_osworld.resources import data_root

__all__ = ["REPO_ROOT", "ConfigError", "describe", "find_prompt", "read_config", "read_mapping", "read_prompted",
           "resolve_paths", "validate"]

REPO_ROOT = data_root()
"""The data root (the checkout, or the installed package's copy): see control_osworld.resources."""
M = TypeVar("M", bound=BaseModel)


class ConfigError(ValueError):
    """A bad config file: the message names the file and the field."""


def read_mapping(path: str | Path, what: str = "config", *, empty_ok: bool = False) -> dict[str, Any]:
    """The YAML file's top-level mapping (an empty file is `{}` when `empty_ok`)."""
    p = Path(path)
    try:
        raw = yaml.safe_load(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"{p}: no such {what} file") from None
    except OSError as exc:
        raise ConfigError(f"{p}: cannot read the {what} file ({exc})") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{p}: not valid YAML ({exc})") from None
    if raw is None and empty_ok:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{p}: expected a mapping of fields, got {type(raw).__name__}")
    return raw


def describe(exc: ValidationError, where: str) -> str:
    """One line per problem: `where: field 'a.b': message`."""
    lines = []
    for err in exc.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        lines.append(f"{where}: field {field!r}: {msg}")
    return "\n".join(lines)


def validate(schema: type[M], raw: dict[str, Any], where: str | Path) -> M:
    """`schema.model_validate(raw)`, a ConfigError naming `where` and each bad field otherwise."""
    try:
        return schema.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(describe(exc, str(where))) from None


def resolve_paths(raw: dict[str, Any], base: Path, keys: tuple[str, ...]) -> dict[str, Any]:
    """Relative paths under `keys` made absolute against `base` (the config file's folder)."""
    out = dict(raw)
    for key in keys:
        v = out.get(key)
        if isinstance(v, str) and v and not Path(v).is_absolute():
            out[key] = str((base / v).resolve())
    return out


def read_config(path: str | Path, schema: type[M], *, paths: tuple[str, ...] = ()) -> M:
    """A config file as `schema` (an empty file is an empty mapping); relative paths under
    the keys `paths` are taken relative to the file's folder."""
    p = Path(path)
    return validate(schema, resolve_paths(read_mapping(p, empty_ok=True), p.parent, paths), p)


def find_prompt(ref: str, config_path: Path) -> Path | None:
    """A prompt file named by a config: absolute, or relative to the config's folder, its
    parent (monitors/x.yaml names prompts/y.txt), the working directory or the repo."""
    p = Path(ref)
    if p.is_absolute():
        return p if p.is_file() else None
    for base in (config_path.parent, config_path.parent.parent, Path.cwd(), REPO_ROOT):
        if (base / p).is_file():
            return base / p
    return None


def read_prompted(path: str | Path, schema: type[M], what: str, /, *, defaults: dict[str, Any] | None = None,
                  **overrides: Any) -> M:
    """A config with a `name` (default: the file's stem) and a `prompt` file, whose text goes
    into `prompt_text` (monitor and classifier configs). `defaults` fill fields the file leaves
    out; `overrides` that are not None win."""
    p = Path(path)
    raw = read_mapping(p, what)
    raw = {**(defaults or {}), **raw, **{k: v for k, v in overrides.items() if v is not None}}
    raw.setdefault("name", p.stem)
    if "prompt_text" in raw:
        raise ConfigError(f"{p}: field 'prompt_text': set 'prompt' (a file) instead")
    if raw.get("prompt") is not None:
        found = find_prompt(str(raw["prompt"]), p)
        if found is None:
            raise ConfigError(f"{p}: field 'prompt': no such file {raw['prompt']!r} (looked next to the config and in the repo)")
        raw["prompt_text"] = found.read_text()
    return validate(schema, raw, p)
