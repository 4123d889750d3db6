"""Test doubles the package's own tests, its benchmarks and users' tests share, kept out of the
harness's code paths (nothing outside tests and scripts imports this package):

- `fake_api`: loopback fakes of the Anthropic and OpenAI APIs (`FakeAPI`, `LoopbackAPI`), for
  running inspect's real providers offline.
- `judges`: `scripted_judge`, an inspect model answering fixed replies in order, for what goes
  through the judging engine.
- `synthetic_runs`: seeded honest and attack run records with real PNG screenshots (the
  monitors' tests and `scripts/bench_monitor.py`; was `monitoring/synthetic.py`).
- `synthetic_tables`: seeded runs and scores tables drawn from the competing-hazards process
  (the analysis tests, `scripts/bench_analysis.py`, and the demo
  `python -m control_osworld.testing.synthetic_tables OUT_DIR`; was `analysis/synthetic.py`).
"""
