"""Test doubles the package's own tests, its benchmarks and users' tests share, kept out of the
harness's code paths (nothing outside tests and scripts imports this package):

- `fake_api`: loopback fakes of the Anthropic and OpenAI APIs (`FakeAPI`, `LoopbackAPI`), for
  running inspect's real providers offline.
- `judges`: `scripted_judge`, an inspect model answering fixed replies in order, for what goes
  through the judging engine.
"""
