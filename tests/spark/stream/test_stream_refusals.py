"""A started stream is a windowed query's own result (docs/guides/streams.md): a plain
query around a windowed subquery is refused where the subquery starts, by dfsql.start and
CREATE STREAMING QUERY alike, and nothing is started. Before, the stream carried the
subquery's panes and left the outer query out (Nexmark q7 live lost its join)."""

from __future__ import annotations

import pytest

import dfsql
from dfsql.errors import SourceError

OUTER = """SELECT key, total FROM (
  SELECT key, SUM(value) AS total FROM scores_live GROUP BY key
  WINDOW FIXED(2 MINUTES) ON event_time PROCESSING TIME arrival_time
) t WHERE total > 3"""


def test_an_outer_plain_query_over_a_windowed_stream_is_refused(spark, paper_live, tmp_path):
    with pytest.raises(SourceError) as info:
        dfsql.start(OUTER, sink="memory", checkpoint=str(tmp_path / "ck"), spark=spark)
    assert (info.value.line, info.value.column) == (2, 3)
    assert "outermost query is plain SQL over a windowed subquery" in info.value.message
    assert "dfsql.sql" in info.value.hint
    assert spark.streams.active == []
    with pytest.raises(SourceError) as created:
        dfsql.sql("CREATE STREAMING QUERY outer_q AS\n" + OUTER, spark)
    assert (created.value.line, created.value.column) == (3, 3)
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
    assert spark.streams.active == []
    # the windowed subquery alone starts (its panes are the sink's rows)
    inner = OUTER.split("(\n", 1)[1].rsplit("\n)", 1)[0]
    query = dfsql.start(inner, sink="memory", checkpoint=str(tmp_path / "ck2"),
                        spark=spark, name="inner_q")
    try:
        query.processAllAvailable()
        assert spark.table("inner_q").count() > 0
    finally:
        query.stop()
