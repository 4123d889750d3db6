"""Where the harness's data lives: the one module that knows.

The data folders (`tasks/`, `side_tasks/`, `monitors/`, `prompts/`, `configs/`, `scenarios/`,
`classifiers/`, `codebooks/`, `vm/`) sit at the top of the checkout. A wheel carries a copy of
them inside the package, `control_osworld/_data/<folder>` (setup.py's build step copies them),
opened here through `importlib.resources`. `data_root()` is the checkout when this package runs
from one (source tree or editable install: the folders next to `pyproject.toml`), else the
packaged copy. `find(path)` lets users' own files win: a path that exists as given (relative to
the working directory, or absolute) is used as is; a relative one that does not is looked up in
the data root (`configs/offline.yaml` works from any directory).

Ground floor: imports nothing of the package.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from pathlib import Path

__all__ = ["DATA_DIRS", "PACKAGED", "ResourceError", "data_dir", "data_root", "find", "find_config", "is_checkout", "names",
           "package_file", "source_root"]

DATA_DIRS = ("tasks", "side_tasks", "monitors", "prompts", "configs", "scenarios", "classifiers", "codebooks", "vm")
PACKAGED = "_data"
"""The folder inside the package that holds the wheel's copy of DATA_DIRS."""


class ResourceError(FileNotFoundError):
    """The data folders are in neither the checkout nor the installed package."""


def _checkout() -> Path:
    return Path(__file__).resolve().parents[1]


def is_checkout(root: Path) -> bool:
    """`root` is a source tree of this project (its pyproject.toml and data folders)."""
    return (root / "pyproject.toml").is_file() and all((root / d).is_dir() for d in ("tasks", "side_tasks", "vm"))


@cache
def data_root() -> Path:
    """The folder holding DATA_DIRS: the checkout first, else the packaged copy."""
    checkout = _checkout()
    if is_checkout(checkout):
        return checkout
    packaged = files("control_osworld") / PACKAGED
    # The desktop binds and copies these folders, so they must be real files on disk (a wheel
    # installed by pip is; a zip import is not).
    if isinstance(packaged, Path) and packaged.is_dir():
        return packaged.resolve()
    raise ResourceError(f"control-osworld's data folders ({', '.join(DATA_DIRS)}) are neither in a checkout at "
                        f"{checkout} nor installed at {packaged}: reinstall the package (pip install control-osworld)")


def data_dir(name: str) -> Path:
    """One of DATA_DIRS, e.g. `data_dir("tasks")`."""
    if name not in DATA_DIRS:
        raise ValueError(f"unknown data folder {name!r} (one of {', '.join(DATA_DIRS)})")
    return data_root() / name


def find(path: str | Path) -> Path:
    """`path` as the user gave it when it exists (or is absolute), else the same relative path
    in the data root when that exists, else `path` unchanged (the caller's error names it)."""
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    packaged = data_root() / p
    return packaged if packaged.exists() else p


def find_config(name: str | Path, folder: str = "configs") -> Path:
    """A config file by path (`find`), or by its name in the data folder `folder`:
    `offline` and `offline.yaml` are `configs/offline.yaml`."""
    p = find(name)
    if p.exists():
        return p
    base = data_dir(folder)
    for cand in (base / str(name), base / f"{name}.yaml"):
        if cand.is_file():
            return cand
    return p


def source_root() -> Path:
    """The folder holding the package's code (`control_osworld/...` paths are relative to it):
    the checkout, or site-packages for an installed wheel."""
    return Path(str(files("control_osworld"))).resolve().parent


def package_file(rel: str) -> Path:
    """A file shipped inside the package itself (not a data folder), e.g.
    `package_file("desktop/install-desktop.sh")`."""
    f = files("control_osworld").joinpath(*rel.split("/"))
    if not isinstance(f, Path) or not f.is_file():
        raise ResourceError(f"control_osworld/{rel} is missing from the installed package")
    return f


def names(folder: str, suffix: str = ".yaml") -> list[str]:
    """The file names (without `suffix`) directly in a data folder: what `find_config` accepts by name."""
    return sorted(p.name.removesuffix(suffix) for p in data_dir(folder).glob(f"*{suffix}"))
