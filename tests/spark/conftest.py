"""Fixtures of the Spark tests that several modules share."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import paper_stream_dir


@pytest.fixture
def paper_live(spark, paper_tables, tmp_path):
    """The paper's rows as the stream ``scores_live`` of one file per arrival minute, up
    to 12:06's (the directory returned); every minute's file in ``all`` beside it."""
    files = tmp_path / "all"
    paper_stream_dir(files)
    live = tmp_path / "live"
    live.mkdir()
    for f in sorted(files.glob("*.parquet"))[:3]:  # 12:04, 12:05 and 12:06
        shutil.copy2(f, live / f.name)
    schema = spark.read.parquet(str(live)).schema
    spark.readStream.schema(schema).parquet(str(live)).createOrReplaceTempView("scores_live")
    yield live
    for q in spark.streams.active:
        q.stop()
    for v in ("scores_live", "scores_before", "scores_after"):
        spark.catalog.dropTempView(v)
