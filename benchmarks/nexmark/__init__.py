"""Nexmark on dfsql (issue #55): the event generator (:mod:`.generator`, run as
``python -m benchmarks.nexmark generate``), the queries (``queries/qN.sql`` in dfsql's
SQL, ``native/qN.sql`` the windowed ones in Spark's own) and their runner
(:mod:`.runner`, ``python -m benchmarks.nexmark run``; live mode over a file stream:
:mod:`.live`, ``run --mode stream``)."""
