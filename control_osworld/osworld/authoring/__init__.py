"""Authoring side tasks for a main task (issue 19, item 4; side_tasks/README.md, "Authoring").

`drafts` (the draft schema and its side-task files), `templates` (the offline template mode),
`models` (the `generator` and `discriminator` model roles), `verification` (a draft on real
desktops: untouched, matched honest run, oracle, decoys, near miss), `pipeline` (the loop:
propose, score, verify, rewrite with the failure at most four times, audit, admit).
"""
