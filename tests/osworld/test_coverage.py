"""`control-osworld tasks coverage PATH` over a small task tree the test writes in upstream's
layout (<domain>/<uuid>.json): per domain, files / loads / runnable / needs assets only / needs
an app, an evaluator, the live web, and which; a table and a final JSON line."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from control_osworld.osworld.cli import tasks_group
from control_osworld.osworld.coverage import classify


def _task(i: str, config=(), func="exact_match", result=None) -> dict:
    return {"id": i, "snapshot": "s", "instruction": "x", "source": "t", "config": list(config),
            "evaluator": {"func": func,
                          "result": result or {"type": "vm_command_line", "command": "echo hi", "shell": True},
                          "expected": {"type": "rule", "rules": {"expected": "hi\n"}}}}


def _tree(root: Path) -> None:
    def put(rel: str, doc) -> None:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(doc if isinstance(doc, str) else json.dumps(doc))

    put("os/a.json", _task("a"))
    put("os/b.json", _task("b", [{"type": "download", "parameters": {"files": [
        {"url": "https://example.invalid/never-cached.bin", "path": "/tmp/x"}]}}]))
    put("os/broken.json", "{not json")
    put("vs_code/c.json", _task("c", [{"type": "launch", "parameters": {"command": ["code", "/home/user"]}}]))
    put("vs_code/d.json", _task("d", func="check_json_keybindings"))
    put("vs_code/e.json", _task("e", [{"type": "launch", "parameters": {"command": ["code"]}},
                                      {"type": "download", "parameters": {"files": [
                                          {"url": "https://example.invalid/n2.bin", "path": "/tmp/y"}]}}],
                                func="check_json_keybindings"))
    put("chrome/f.json", _task("f", result={"type": "googledrive_file", "path": "x"}))


def test_coverage_table_and_json(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTROL_OSWORLD_ASSETS", str(tmp_path / "assets"))
    _tree(tmp_path / "examples")
    r = CliRunner().invoke(tasks_group, ["coverage", str(tmp_path / "examples")])
    assert r.exit_code == 0, r.output
    lines = r.output.strip().splitlines()
    out = json.loads(lines[-1])
    os_, vs, ch, total = out["domains"]["os"], out["domains"]["vs_code"], out["domains"]["chrome"], out["total"]
    assert (os_["files"], os_["loads"], os_["runnable"], os_["needs_assets_only"]) == (3, 2, 1, 1)
    assert (vs["files"], vs["loads"], vs["runnable"], vs["needs_assets_only"]) == (3, 3, 0, 0)
    assert (vs["needs_app"], vs["needs_evaluator"], vs["needs_assets"]) == (2, 2, 1)
    assert ch["needs_web"] == 1
    assert total["files"] == 7 and total["loads"] == 6 and total["runnable"] == 1
    assert total["which"]["app"] == {"VS Code": 2}
    assert total["which"]["evaluator"] == {"metric check_json_keybindings": 2}
    assert total["which"]["web"] == {"Google Drive": 1}
    # the table: a header, one row per domain and the total
    table = "\n".join(lines[:-1])
    assert lines[0].split()[:4] == ["domain", "files", "loads", "runnable"]
    row = next(line for line in lines if line.startswith("vs_code"))
    assert row.split()[1:] == ["3", "3", "0", "0", "2", "2", "0", "0", "0", "0"]
    assert "VS Code (2)" in table and "metric check_json_keybindings (2)" in table


def test_classify_reasons():
    assert classify("needs a cached asset: https://x (control-osworld tasks fetch-assets)")[0] == "assets"
    assert classify("needs GIMP, which our desktops lack") == ("app", "GIMP")
    assert classify("getter 'vlc_config' needs VLC") == ("app", "VLC")
    assert classify("needs Chrome's remote debugging port") == ("app", "Chrome (remote debugging port)")
    assert classify("metric 'compare_pdfs' is not implemented here") == ("evaluator", "metric compare_pdfs")
    assert classify("unsupported step type 'tidy_desktop' (is not implemented on our desktops) (in x.json)") == \
        ("evaluator", "setup step tidy_desktop")
    assert classify("getter 'googledrive_file' needs Google Drive") == ("web", "Google Drive")
