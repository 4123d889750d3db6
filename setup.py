"""The wheel carries the data folders: `build_py` copies the checkout's top-level folders
(`control_osworld.resources.DATA_DIRS`) into `control_osworld/_data/`, where
`control_osworld.resources` opens them when the package runs from an installed wheel. The
repository keeps its layout; editable installs read the checkout's folders directly.
Everything else is in pyproject.toml."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent


def _resources():
    # resources.py imports only the standard library: load it alone, not the package.
    spec = importlib.util.spec_from_file_location("_control_osworld_resources", HERE / "control_osworld" / "resources.py")
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def data_files() -> list[tuple[Path, str]]:
    """(source file, path under _data/) for every file of the data folders, without caches."""
    res = _resources()
    out = []
    for name in res.DATA_DIRS:
        for root, dirs, files in os.walk(HERE / name):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for f in sorted(files):
                src = Path(root) / f
                if f.endswith(".pyc") or not src.is_file():
                    continue
                out.append((src, f"{res.PACKAGED}/{src.relative_to(HERE).as_posix()}"))
    return out


class build_py_with_data(build_py):
    """build_py, plus the data folders into control_osworld/_data/ (not for editable installs)."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "control_osworld"
        for src, rel in data_files():
            dst = target / rel
            self.mkpath(str(dst.parent))
            self.copy_file(str(src), str(dst))  # keeps the mode (vm/ scripts stay executable)

    def get_outputs(self, include_bytecode: bool = True) -> list[str]:
        outs = list(super().get_outputs(include_bytecode))
        if not getattr(self, "editable_mode", False):
            target = Path(self.build_lib) / "control_osworld"
            outs += [str(target / rel) for _, rel in data_files()]
        return outs


setup(cmdclass={"build_py": build_py_with_data})
