"""String similarity as upstream OSWorld computes it with rapidfuzz (`fuzz.ratio`), without
rapidfuzz: the normalised Indel similarity, 2·LCS(a, b) / (|a| + |b|) (1.0 for two empty
strings), with the longest common subsequence found by the bit-parallel algorithm of
Hyyrö ("Bit-parallel LCS-length computation revisited", 2004), which rapidfuzz uses too.
Exact, not an approximation: difflib's SequenceMatcher.ratio differs (it matches greedy blocks
and drops "junk")."""

from __future__ import annotations


def lcs_length(a: str, b: str) -> int:
    """Length of a longest common subsequence of `a` and `b` (O(|a|·|b| / word) big-int ops)."""
    if len(a) < len(b):
        a, b = b, a
    if not b:
        return 0
    masks: dict[str, int] = {}
    for i, ch in enumerate(a):
        masks[ch] = masks.get(ch, 0) | (1 << i)
    full = (1 << len(a)) - 1
    s = full
    for ch in b:
        u = s & masks.get(ch, 0)
        s = ((s + u) | (s - u)) & full
    return len(a) - bin(s).count("1")


def ratio(a: str, b: str) -> float:
    """rapidfuzz.fuzz.ratio(a, b) / 100: in [0, 1]."""
    total = len(a) + len(b)
    if total == 0:
        return 1.0
    return 2.0 * lcs_length(a, b) / total
