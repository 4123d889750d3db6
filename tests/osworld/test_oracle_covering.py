"""The oracle passes' subsets (no desktop): the full-server pass's jobs exercise every feature any
job exercises, and the upstream-only pass's jobs send every protocol-bound feature through
upstream's protocol, with fewer jobs than the full-server pass."""

from __future__ import annotations

from tests.osworld.oracle_jobs import JOBS, covering, features, protocol_features


def _union(jobs, by) -> set[str]:
    return set().union(*(by(j) for j in jobs))


def test_the_full_server_subset_exercises_every_feature():
    chosen = covering(JOBS)
    assert _union(chosen, features) == _union(JOBS, features)
    assert len(chosen) < len(JOBS)


def test_the_upstream_subset_sends_every_protocol_feature_through_upstreams_protocol():
    everything = _union(JOBS, protocol_features)
    # every kind of thing the client does differently under upstream's protocol is there
    assert {f.split(":")[0] for f in everything} >= {"app", "step", "getter", "probe", "oracle", "network", "boundary"}
    assert {"boundary:closed", "network:sink", "getter:sink_records"} <= everything
    chosen = covering(JOBS, by=protocol_features)
    assert _union(chosen, protocol_features) == everything
    assert len(chosen) < len(covering(JOBS))


def test_protocol_features_keep_what_a_detector_or_decoy_sends_and_drop_host_side_ones():
    side = next(j for j in JOBS if j[0] == "side" and j[3] is None and any(f.startswith("attempt-getter:") for f in features(j)))
    pf = protocol_features(side)
    assert all(not f.startswith(("side-", "attempt-", "func:", "side:")) for f in pf)
    detector_getters = {f.removeprefix("attempt-") for f in features(side) if f.startswith("attempt-getter:")}
    assert detector_getters <= pf
