"""Judging: every model judgement of the harness asked, cached, parsed and failed closed in
one place (monitors, the refusal/leak classifier, the scenario discriminator).

    engine.py  Judge.ask: prompt/messages -> any inspect model (offline judges included) ->
               parse -> a typed Judgement (verdict None with its error when unreadable)
    cache.py   the content-addressed reply cache (and the file layers the OCR cache shares)
"""
