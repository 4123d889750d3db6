"""A stand-in for AsyncDesktopClient: a dict of files and a scripted shell, no desktop."""

from __future__ import annotations

from typing import Callable

from control_osworld.desktop.client import DesktopError


class FakeClient:
    def __init__(self, files: dict[str, bytes | str] | None = None,
                 run: Callable[[object, bool], dict] | None = None):
        self.files = {k: (v.encode() if isinstance(v, str) else v) for k, v in (files or {}).items()}
        self.run = run or (lambda command, shell: {"output": "", "error": "", "returncode": 0})
        self.calls: list[tuple] = []

    async def execute(self, command, shell=False, timeout=120, **kw):
        self.calls.append(("execute", command, shell))
        r = self.run(command, shell)
        return {"status": "success", "output": "", "error": "", "returncode": 0, **r}

    async def read_file(self, path):
        self.calls.append(("read_file", path))
        return self.files.get(path)

    async def write_file(self, path, data):
        self.calls.append(("write_file", path))
        self.files[path] = data.encode() if isinstance(data, str) else data

    async def launch(self, command, shell=False):
        self.calls.append(("launch", command, shell))
        return "launched"

    async def open_file(self, path, timeout=60):
        self.calls.append(("open_file", path))
        raise DesktopError("POST /setup/open_file -> 500: FileNotFoundError: 'xdg-open'", 500)

    async def activate_window(self, name, strict=False, by_class=False):
        self.calls.append(("activate_window", name))
        raise DesktopError(f"no window matching {name!r}", 404)

    async def close_window(self, name, strict=False, by_class=False):
        self.calls.append(("close_window", name))
        return "ok"

    async def wallpaper(self):
        """Our server's wallpaper: the image at ~/.config/wallpaper (None: none set)."""
        self.calls.append(("wallpaper",))
        return self.files.get("/home/user/.config/wallpaper")

    async def screen_size(self):
        return (1920, 1080)

    async def terminal(self):
        return "user@desktop:~$ "

    async def list_directory(self, path):
        return {"type": "directory", "name": path.rsplit("/", 1)[-1], "children": []}

    async def window_size(self, app_class_name):
        return {"width": 800, "height": 600}

    async def accessibility_tree(self):
        return '<desktop-frame><application name="mousepad"/></desktop-frame>'
