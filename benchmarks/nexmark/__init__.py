"""Nexmark on dfsql (issue #55): the event generator now (:mod:`.generator`, run as
``python -m benchmarks.nexmark generate``); the queries (q0–q23 of nexmark/nexmark, in
dfsql's SQL) and their runner (``python -m benchmarks.nexmark run``) are to come, beside
it: ``queries/`` for the statements, ``runner.py`` for the runs."""
