"""The third verdict: a getter or metric that cannot establish what it reads raises `Unknown`
with its reason (a command that failed or timed out, output that could not be decoded, a listing
past its cap, a file that could not be read), and the engine scores that metric `unknown`, never
0 (docs/integrity.md, "Three-valued verdicts")."""

from __future__ import annotations


class Unknown(Exception):
    """The state could not be established; `str(e)` is the reason."""
