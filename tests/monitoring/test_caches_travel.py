"""Caches travel with the scores (issue 21): by default the monitor reply cache and the OCR cache
live in the scores store's folder, so a copied log folder re-scores without asking a model or
OCR'ing again, even on a machine whose own cache is empty; the user's cache sits behind it."""

from __future__ import annotations

import shutil

import pytest

from control_osworld.monitoring import ocr
from control_osworld.monitoring.cache import FileLayers, beside_store
from control_osworld.monitoring.config import load_config
from control_osworld.monitoring.runtime import score_runs

from .conftest import model_config

MODEL = "openai/gpt-4.1-mini"


def _fresh_user_cache(monkeypatch, tmp_path, name: str):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / name))
    monkeypatch.delenv("CONTROL_OSWORLD_OCR_CACHE", raising=False)


def test_a_copied_log_folder_rescores_without_asking_the_model(fake_api, monkeypatch, tmp_path, runs):
    _fresh_user_cache(monkeypatch, tmp_path, "xdg-a")
    cfg = model_config(MODEL, inputs="A+T")
    first = score_runs(runs[:2], [cfg], ["A+T"], tmp_path / "a" / "logs" / "scores")
    asked = len(fake_api.requests)
    assert asked > 0 and first["error"].isna().all()
    kept = list((beside_store(tmp_path / "a" / "logs" / "scores") / "monitor").rglob("*.json"))
    assert len(kept) == asked  # one file per distinct call, in the store's folder
    # another machine: the log folder copied, the scores themselves dropped, an empty user cache
    shutil.copytree(tmp_path / "a" / "logs", tmp_path / "b" / "logs")
    for p in (tmp_path / "b" / "logs" / "scores").iterdir():
        if p.name != "cache":
            shutil.rmtree(p) if p.is_dir() else p.unlink()
    _fresh_user_cache(monkeypatch, tmp_path, "xdg-b")
    again = score_runs(runs[:2], [cfg], ["A+T"], tmp_path / "b" / "logs" / "scores")
    assert len(fake_api.requests) == asked and again["cached"].all() and len(again) == len(first)
    assert list(again.sort_values("run_id")["score"]) == list(first.sort_values("run_id")["score"])


def test_the_user_cache_behind_fills_a_new_store(fake_api, monkeypatch, tmp_path, runs):
    _fresh_user_cache(monkeypatch, tmp_path, "xdg")
    cfg = model_config(MODEL, inputs="A+T")
    score_runs(runs[:1], [cfg], ["A+T"], tmp_path / "one" / "scores")
    asked = len(fake_api.requests)
    shutil.rmtree(tmp_path / "one")  # only the user's cache has the replies now
    fresh = score_runs(runs[:1], [cfg], ["A+T"], tmp_path / "two" / "scores")
    assert len(fake_api.requests) == asked and fresh["cached"].all()
    assert len(list((tmp_path / "two" / "scores" / "cache" / "monitor").rglob("*.json"))) == asked  # copied forward


def test_an_explicit_cache_dir_is_the_only_one(fake_api, monkeypatch, tmp_path, runs):
    _fresh_user_cache(monkeypatch, tmp_path, "xdg")
    cfg = model_config(MODEL, inputs="A+T")
    score_runs(runs[:1], [cfg], ["A+T"], tmp_path / "s" / "scores", cache_dir=tmp_path / "mine")
    assert list((tmp_path / "mine").rglob("*.json"))
    assert not (tmp_path / "s" / "scores" / "cache" / "monitor").exists()
    assert not (tmp_path / "xdg").exists() or not list((tmp_path / "xdg").rglob("*.json"))


def test_ocr_results_travel_with_the_store(monkeypatch, tmp_path, runs):
    calls: list[int] = []

    def fake_tesseract(data: bytes) -> str:
        calls.append(len(data))
        return f"text of {len(data)} bytes"

    monkeypatch.setattr(ocr, "tesseract", fake_tesseract)
    # the read-ahead's batches (ocr.ocr_screens) go through the same fake, one call per image
    monkeypatch.setattr(ocr, "tesseract_batch", lambda images: [fake_tesseract(d) for d in images])
    monkeypatch.setattr(ocr, "_MEMO", {})
    monkeypatch.setattr(ocr, "_KEPT", set())
    _fresh_user_cache(monkeypatch, tmp_path, "xdg-a")
    cfg = load_config("monitors/per_step_rules.yaml")
    first = score_runs(runs[:2], [cfg], ["S"], tmp_path / "a" / "scores", progress=False)
    n = len(calls)
    assert n > 0 and first["error"].isna().all()
    assert len(list((tmp_path / "a" / "scores" / "cache" / "ocr").rglob("*.txt"))) == n
    # same process (OCR memo warm), a new store: the memo's texts are put into the new store's cache
    score_runs(runs[:2], [cfg], ["S"], tmp_path / "b" / "scores", progress=False)
    assert len(calls) == n
    assert len(list((tmp_path / "b" / "scores" / "cache" / "ocr").rglob("*.txt"))) == n
    # another machine: a copied folder, empty memo and user cache: nothing is OCR'd again
    shutil.copytree(tmp_path / "a", tmp_path / "c")
    (tmp_path / "c" / "scores" / "scores.parquet").unlink(missing_ok=True)
    for part in (tmp_path / "c" / "scores").glob("part*"):
        shutil.rmtree(part) if part.is_dir() else part.unlink()
    monkeypatch.setattr(ocr, "_MEMO", {})
    _fresh_user_cache(monkeypatch, tmp_path, "xdg-c")
    again = score_runs(runs[:2], [cfg], ["S"], tmp_path / "c" / "scores", progress=False)
    assert len(calls) == n and len(again) == len(first)


def test_file_layers_read_through_and_torn_files(tmp_path):
    front, back = tmp_path / "front", tmp_path / "back"
    FileLayers([back], ".txt").write("ab" + "0" * 62, "behind")
    layers = FileLayers([front, back], ".txt")
    assert layers.read("ab" + "0" * 62) == "behind"
    assert (front / "ab" / ("ab" + "0" * 62 + ".txt")).read_text() == "behind"  # copied forward
    (front / "cd").mkdir()
    (front / "cd" / ("cd" + "1" * 62 + ".txt")).write_bytes(b"\xff\xfe torn")
    assert layers.read("cd" + "1" * 62) is None  # unreadable reads as a miss
    with pytest.raises(ValueError):
        FileLayers([], ".txt")


def test_a_read_ahead_that_fails_leaves_each_view_to_its_own_ocr(monkeypatch, tmp_path, runs):
    """The batched read-ahead (ocr.ocr_screens) failing outright (tesseract missing, a crash)
    stops nothing: each view reads its screenshots itself, and a view whose OCR fails is that
    row's error, as without the read-ahead."""
    def broken(images: list[bytes]) -> list[str]:
        raise ocr.OcrError("tesseract is not installed")

    def failing(data: bytes) -> str:
        raise ocr.OcrError("tesseract is not installed")

    monkeypatch.setattr(ocr, "tesseract_batch", broken)
    monkeypatch.setattr(ocr, "tesseract", failing)
    monkeypatch.setattr(ocr, "_MEMO", {})
    monkeypatch.setattr(ocr, "_KEPT", set())
    _fresh_user_cache(monkeypatch, tmp_path, "xdg-broken")
    cfg = load_config("monitors/per_step_rules.yaml")
    df = score_runs(runs[:1], [cfg], ["S", "A"], tmp_path / "scores", progress=False)
    s_rows, a_rows = df[df["inputs"] == "S"], df[df["inputs"] == "A"]
    assert len(s_rows) and s_rows["error"].str.contains("tesseract is not installed").all()
    assert len(a_rows) and a_rows["error"].isna().all()
