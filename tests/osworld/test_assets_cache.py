"""The asset cache (`control-osworld tasks fetch-assets`) against a loopback HTTP server:
every URL a task file names is fetched once into a content-addressed cache, setup steps and
getters then read it with the server gone, and a missing asset is an error naming the URL,
the task file, the field and the command to fetch it. Task files are written by the test."""

from __future__ import annotations

import asyncio
import hashlib
import http.server
import json
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

from control_osworld.osworld import assets
from control_osworld.osworld.cli import tasks_group
from control_osworld.osworld.evaluators.engine import evaluate_detailed
from control_osworld.osworld.loader import load_task
from control_osworld.osworld.setup import SetupError, run_steps
from tests.osworld.fakes import FakeClient

FILES = {"/data/budget.csv": b"item,cost\nrent,1200\n", "/data/gold.txt": b"the gold answer\n",
         "/data/same-bytes.txt": b"the gold answer\n"}


class _Handler(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []

    def do_GET(self):  # noqa: N802
        _Handler.hits.append(self.path)
        body = FILES.get(self.path.split("?")[0])
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *a):
        pass


@pytest.fixture
def server():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    _Handler.hits = []
    yield srv, f"http://127.0.0.1:{srv.server_address[1]}"
    srv.shutdown()
    srv.server_close()


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CONTROL_OSWORLD_ASSETS", str(tmp_path / "assets"))
    return tmp_path / "assets"


def _task(base: str, extra_url: str | None = None) -> dict:
    files = [{"url": f"{base}/data/budget.csv?x=1", "path": "/home/user/budget.csv"}]
    if extra_url:
        files.append({"url": extra_url, "path": "/home/user/missing.txt"})
    return {
        "id": "cache-demo", "snapshot": "os", "instruction": "i", "source": "test",
        "config": [{"type": "sleep", "parameters": {"seconds": 0}},
                   {"type": "download", "parameters": {"files": files}}],
        "evaluator": {"func": "compare_text_file",
                      "result": {"type": "vm_file", "path": "/home/user/answer.txt", "dest": "answer.txt"},
                      "expected": {"type": "cloud_file", "path": f"{base}/data/gold.txt", "dest": "gold.txt"}},
    }


def _write(folder: Path, rel: str, data: dict) -> Path:
    p = folder / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(data))
    return p


def _fetch(*paths) -> tuple[int, str, dict]:
    r = CliRunner().invoke(tasks_group, ["fetch-assets", *map(str, paths)])
    return r.exit_code, r.output, json.loads(r.output.strip().splitlines()[-1])


def test_asset_needs_names_every_url_with_its_field():
    doc = _task("http://h")
    doc["evaluator"]["postconfig"] = [{"type": "download", "parameters": {"files": [
        {"url": "https://h/p.bin", "path": "/tmp/p"}, {"url": "file://{ASSETS}/local.txt", "path": "/tmp/l"}]}}]
    doc["evaluator"]["expected"] = [doc["evaluator"]["expected"],
                                    {"type": "cloud_file", "multi": True, "path": ["http://h/a", "http://h/b"],
                                     "dest": ["a", "b"]}]
    got = {(n.url, n.field, n.kind) for n in assets.asset_needs(doc, "t.json")}
    assert got == {
        ("http://h/data/budget.csv?x=1", "config[1].parameters.files[0].url", "download"),
        ("https://h/p.bin", "evaluator.postconfig[0].parameters.files[0].url", "download"),
        ("http://h/data/gold.txt", "evaluator.expected[0].path", "cloud_file"),
        ("http://h/a", "evaluator.expected[1].path[0]", "cloud_file"),
        ("http://h/b", "evaluator.expected[1].path[1]", "cloud_file"),
    }


def test_fetch_then_run_offline(tmp_path, server, cache):
    srv, base = server
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task(base))
    before = load_task(f)
    assert not before.runnable and "needs a cached asset" in before.reason and "fetch-assets" in before.reason

    code, out, summary = _fetch(tmp_path / "tasks")
    assert code == 0, out
    assert summary["urls"] == 2 and summary["fetched"] == 2 and summary["failed"] == 0
    # content-addressed: the blob's name is the hash of its bytes
    for body in (FILES["/data/budget.csv"], FILES["/data/gold.txt"]):
        assert (cache / "downloads" / "blobs" / hashlib.sha256(body).hexdigest()).read_bytes() == body

    # a second run fetches nothing
    n_hits = len(_Handler.hits)
    code, out, summary = _fetch(f)
    assert code == 0 and summary["fetched"] == 0 and summary["already_cached"] == 2
    assert len(_Handler.hits) == n_hits

    # offline: the server is gone, the task is runnable and its setup and getters read the cache
    srv.shutdown()
    srv.server_close()
    task = load_task(f)
    assert task.runnable, task.reason
    c = FakeClient(files={"/home/user/answer.txt": "the gold answer\n"})
    asyncio.run(run_steps(c, task.config, file=task.file))
    assert c.files["/home/user/budget.csv"] == FILES["/data/budget.csv"]
    r = asyncio.run(evaluate_detailed(c, task.evaluator, "DONE", file=task.file))
    assert r.score == 1.0, r.notes


def test_identical_bytes_share_one_blob(tmp_path, server, cache):
    _, base = server
    doc = _task(base)
    doc["config"][1]["parameters"]["files"].append({"url": f"{base}/data/same-bytes.txt", "path": "/tmp/s"})
    _write(tmp_path, "t/a.json", doc)
    code, out, summary = _fetch(tmp_path / "t")
    assert code == 0 and summary["fetched"] == 3
    assert len(list((cache / "downloads" / "blobs").iterdir())) == 2
    assert len(list((cache / "downloads" / "urls").iterdir())) == 3


def test_a_failed_url_is_named_and_the_others_still_come(tmp_path, server):
    _, base = server
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task(base, extra_url=f"{base}/data/absent.txt"))
    code, out, summary = _fetch(f)
    assert code == 1
    assert summary["fetched"] == 2 and summary["failed"] == 1
    [fail] = summary["failures"]
    assert fail["url"] == f"{base}/data/absent.txt" and "404" in fail["error"]
    assert "config[1].parameters.files[1].url" in fail["needed_by"] and "cache-demo.json" in fail["needed_by"]


def test_missing_asset_errors_name_url_file_field_and_command(tmp_path):
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task("http://127.0.0.1:9"))
    task = load_task(f)
    c = FakeClient(files={"/home/user/answer.txt": "x"})
    with pytest.raises(SetupError) as e:
        asyncio.run(run_steps(c, task.config, file=task.file))
    msg = str(e.value)
    assert "http://127.0.0.1:9/data/budget.csv?x=1" in msg and task.file in msg
    assert "config[1].parameters.files[0].url" in msg
    assert f"control-osworld tasks fetch-assets {task.file}" in msg
    # the gold file of a getter: the harness cannot score (unknown, never 0) and says what to fetch
    r = asyncio.run(evaluate_detailed(c, task.evaluator, "DONE", file=task.file))
    assert r.score is None
    assert "http://127.0.0.1:9/data/gold.txt" in r.unknown and "fetch-assets" in r.unknown and task.file in r.unknown


def test_upstream_cache_layout_is_still_read(tmp_path):
    url = "https://example.org/upstream-cached.txt"
    p = assets.download_cache_path(url, "/home/user/upstream-cached.txt")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("from upstream's cache")
    assert assets.cached_download(url, "/home/user/upstream-cached.txt") == p


# ----------------------------------------------------------------------------- a team's cache


def _cli(*args) -> tuple[int, str, dict]:
    r = CliRunner().invoke(tasks_group, list(map(str, args)))
    return r.exit_code, r.output, json.loads(r.output.strip().splitlines()[-1])


def _second_machine(monkeypatch, tmp_path, name="other") -> Path:
    d = tmp_path / name
    monkeypatch.setenv("CONTROL_OSWORLD_ASSETS", str(d))
    return d


@pytest.mark.parametrize("dest", ["export-dir", "export.tar.gz", "export.tar"])
def test_export_then_import_on_another_machine_runs_offline(tmp_path, server, monkeypatch, dest):
    srv, base = server
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task(base))
    assert _fetch(f)[0] == 0
    code, out, rep = _cli("export-assets", tmp_path / dest)
    assert code == 0 and rep["copied"] == 2 and rep["refused"] == 0, out
    srv.shutdown()
    srv.server_close()

    other = _second_machine(monkeypatch, tmp_path)
    assert not load_task(f).runnable  # nothing cached on the second machine yet
    code, out, rep = _cli("fetch-assets", "--from", tmp_path / dest, "--no-network", f)
    assert code == 0, out
    assert rep["imported"]["copied"] == 2 and rep["already_cached"] == 2 and rep["fetched"] == 0
    for body in (FILES["/data/budget.csv"], FILES["/data/gold.txt"]):
        assert (other / "downloads" / "blobs" / hashlib.sha256(body).hexdigest()).read_bytes() == body
    task = load_task(f)
    assert task.runnable, task.reason
    c = FakeClient(files={"/home/user/answer.txt": "the gold answer\n"})
    asyncio.run(run_steps(c, task.config, file=task.file))
    assert asyncio.run(evaluate_detailed(c, task.evaluator, "DONE", file=task.file)).score == 1.0
    # importing again copies nothing
    code, out, rep = _cli("import-assets", tmp_path / dest)
    assert code == 0 and rep["copied"] == 0 and rep["already_cached"] == 2


def _exported(tmp_path, server) -> tuple[Path, str, str]:
    _, base = server
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task(base))
    assert _fetch(f)[0] == 0
    assert _cli("export-assets", tmp_path / "exp")[0] == 0
    return tmp_path / "exp", hashlib.sha256(FILES["/data/budget.csv"]).hexdigest(), \
        hashlib.sha256(FILES["/data/gold.txt"]).hexdigest()


def test_import_refuses_a_corrupt_blob_naming_it(tmp_path, server, monkeypatch):
    exp, budget, gold = _exported(tmp_path, server)
    (exp / "blobs" / budget).write_bytes(b"item,cost\nrent,9999\n")  # same size, other bytes
    other = _second_machine(monkeypatch, tmp_path)
    code, out, rep = _cli("import-assets", exp)
    assert code == 1 and rep["copied"] == 1 and rep["refused"] == 1
    [problem] = rep["problems"]
    assert "budget.csv" in problem and budget in problem and "corrupt" in problem
    assert not (other / "downloads" / "blobs" / budget).exists()
    assert (other / "downloads" / "blobs" / gold).exists()
    assert not list((other / "downloads" / "blobs").glob(".partial-*"))


def test_import_refuses_swapped_blobs(tmp_path, server, monkeypatch):
    exp, budget, gold = _exported(tmp_path, server)
    a, b = exp / "blobs" / budget, exp / "blobs" / gold
    da, db = a.read_bytes(), b.read_bytes()
    a.write_bytes(db)
    b.write_bytes(da)
    other = _second_machine(monkeypatch, tmp_path)
    code, out, rep = _cli("import-assets", exp)
    assert code == 1 and rep["copied"] == 0 and rep["refused"] == 2
    assert not list((other / "downloads" / "blobs").glob("*"))
    assert "REFUSED" in out


def test_import_refuses_a_missing_blob_and_a_bad_manifest(tmp_path, server, monkeypatch):
    exp, budget, _ = _exported(tmp_path, server)
    (exp / "blobs" / budget).unlink()
    _second_machine(monkeypatch, tmp_path)
    code, out, rep = _cli("import-assets", exp)
    assert code == 1 and rep["copied"] == 1 and "missing" in rep["problems"][0]
    (exp / "manifest.json").write_text('{"format": "something-else/9", "entries": []}')
    r = CliRunner().invoke(tasks_group, ["import-assets", str(exp)])
    assert r.exit_code != 0 and "manifest.json" in r.output and "format" in r.output


def test_archive_members_outside_blobs_are_never_extracted(tmp_path, monkeypatch):
    import io
    import tarfile

    body = b"payload"
    sha = hashlib.sha256(body).hexdigest()
    manifest = json.dumps({"format": "control-osworld-assets/1",
                           "entries": [{"url": "https://h/p", "sha256": sha, "size": len(body), "name": "p"}]}).encode()
    arc = tmp_path / "evil.tar"
    with tarfile.open(arc, "w") as tar:
        for name, data in (("manifest.json", manifest), (f"blobs/{sha}", body), ("../../escaped", b"x"),
                           ("/tmp/abs-escape-evaluators", b"x")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    _second_machine(monkeypatch, tmp_path / "deep" / "er")
    code, out, rep = _cli("import-assets", arc)
    assert code == 0 and rep["copied"] == 1
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "deep" / "escaped").exists()
    assert not Path("/tmp/abs-escape-evaluators").exists()
    assert assets.require_download("https://h/p").read_bytes() == body


def test_a_corrupt_cached_blob_is_refused_at_use_and_by_export(tmp_path, server):
    _, base = server
    f = _write(tmp_path, "tasks/os/cache-demo.json", _task(base))
    assert _fetch(f)[0] == 0
    blob = assets.cached_download(f"{base}/data/gold.txt")
    assert blob is not None
    blob.write_bytes(b"the gold answeR\n")
    with pytest.raises(assets.CorruptAssetError) as e:
        assets.require_download(f"{base}/data/gold.txt")
    assert str(blob) in str(e.value) and f"{base}/data/gold.txt" in str(e.value)
    code, out, rep = _cli("verify-assets")
    assert code == 1 and rep["problems"] == 1 and str(blob) in out
    code, out, rep = _cli("export-assets", tmp_path / "exp")
    assert code == 1 and rep["copied"] == 1 and f"{base}/data/gold.txt" in rep["problems"][0]
    manifest = json.loads((tmp_path / "exp" / "manifest.json").read_text())
    assert [e["url"] for e in manifest["entries"]] == [f"{base}/data/budget.csv?x=1"]
    # a setup step reading the corrupt blob fails naming it (an infrastructure error, not a 0)
    task = load_task(f)
    doc = _task(base)
    doc["config"][1]["parameters"]["files"] = [{"url": f"{base}/data/gold.txt", "path": "/tmp/g"}]
    g = _write(tmp_path, "tasks/os/g.json", doc)
    with pytest.raises(SetupError, match="corrupt"):
        asyncio.run(run_steps(FakeClient(), load_task(g).config, file=task.file))
