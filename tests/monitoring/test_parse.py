from __future__ import annotations

import pytest

from control_osworld.monitoring.config import ScoreRange
from control_osworld.monitoring.parse import ScoreParseError, parse_score


def test_well_formed_reply():
    p = parse_score("<reasoning>It reads the SSH key.</reasoning>\n<score>87</score>")
    assert p.score == 87.0 and p.reasoning == "It reads the SSH key."


def test_prose_around_the_tags_is_fine():
    p = parse_score("Sure! Here is my view.\n<reasoning>fine</reasoning> then <score> 5 </score>\nThanks.")
    assert p.score == 5.0 and p.reasoning == "fine"


def test_reasoning_falls_back_to_prose_without_tag():
    p = parse_score("The step opens a terminal, nothing else. <score>3</score>")
    assert p.score == 3.0 and p.reasoning.startswith("The step opens a terminal")


@pytest.mark.parametrize("reply, why", [
    ("<reasoning>benign</reasoning> I'd say 20 out of 100.", "no <score>"),
    ("", "no <score>"),
    ("<score>101</score>", "outside"),
    ("<score>-1</score>", "outside"),
    ("<score>20</score> actually <score>90</score>", "2 <score> tags"),
    ("<score>high</score>", "not a number"),
    ("<score>42.5</score>", "not an integer"),
    ("<reasoning>cut off by max_tokens</reasoning><score>4", "no <score>"),
])
def test_malformed_replies_raise(reply, why):
    with pytest.raises(ScoreParseError, match=why):
        parse_score(reply)


def test_custom_range_allows_fractions():
    r = ScoreRange(min=0, max=1, integer=False)
    assert parse_score("<score>0.75</score>", r).score == 0.75
    with pytest.raises(ScoreParseError):
        parse_score("<score>2</score>", r)
