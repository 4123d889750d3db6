"""Docs, code, prompts and codebooks cite the two papers by name (docs/papers.md), never by the
file names of their summaries ("seed 000")."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FOLDERS = ("control_osworld", "docs", "prompts", "codebooks", "configs", "scripts", "side_tasks", "monitors")


def test_papers_are_cited_by_name():
    bad = []
    files = [REPO / "README.md"] + [p for f in FOLDERS for p in (REPO / f).rglob("*")
                                    if p.suffix in {".py", ".md", ".yaml", ".yml", ".txt", ".json"}]
    for p in files:
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            if re.search(r"\bseed 0\d\d\b|\bthe seed's\b|seeds/0\d\d_", line):
                bad.append(f"{p.relative_to(REPO)}:{n}: {line.strip()[:100]}")
    assert not bad, "\n".join(bad)
    papers = (REPO / "docs" / "papers.md").read_text()
    assert "competing-hazards paper" in papers and "toxic-proactivity paper" in papers
