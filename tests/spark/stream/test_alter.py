"""A running continuous query changed without losing what it has read (issue #34, item
2; docs/guides/streams.md#continuous-queries-as-statements): ``ALTER STREAMING QUERY q AS <windowed query>`` takes effect at
the frontier of q's last completed micro-batch; the new query starts from the state a
replay of everything q read gives, and q's table is restated as the new query's.

Expected rows come from the paper by hand (Figure 14's sessions, the gap widened from 1
to 5 minutes at 12:06:20) and, over random workloads changed at a random file, from
the bounded replay of the new query over all the rows (the replay's driver, not the
stream)."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

import dfsql
from dfsql.errors import DfsqlError
from dfsql.spark.progress import listening
from tests.spark.feeds import FIG14, GAP5
from tests.spark.feeds import STREAM_QUERY as QUERY
from tests.spark.feeds import start as _start
from tests.spark.feeds import t as _t
from tests.spark.feeds import with_sentinel as _with_sentinel
from tests.spark.feeds import workload as _workload
from tests.spark.feeds import write_parts as _write_parts


def _table(spark, name: str) -> list[tuple]:
    return [tuple(r) for r in spark.sql(f"SELECT * FROM global_temp.{name} ORDER BY "
                                        "key, window_start").collect()]


def _catch_up(name: str) -> None:
    from dfsql.continuous_queries import QUERIES

    QUERIES.running[name].query.processAllAvailable()


def test_a_wider_gap_restates_the_table_and_goes_on(spark, paper_live):
    """Figure 14's query (sessions, GAP 1 MINUTE) has read the rows that arrived up to
    12:06:20: its table holds [12:00:30,12:01:30) 5, [12:02:10,12:03:10) 7 and
    [12:03:20,12:05:00) 10. The gap widened to 5 minutes there: by hand, the 5, 7, 3, 4
    and 3 (event times 12:00:30 … 12:04:00) are one session [12:00:30,12:09:00); its
    period fired at 12:06:00 (the 3 arriving at 12:05:20 started it) with 22, an EARLY
    pane 0 of the window the last merge made. Then the other rows arrive: all one session
    up to 12:07:50 + 5 minutes, 51 at 12:09's period, still EARLY (the watermark is
    12:09:00)."""
    _start(spark, "gap_live", FIG14.replace("FROM scores", "FROM scores_live"))
    assert [r[1] for r in _table(spark, "gap_live")] == [5, 7, 10]
    changed = dfsql.sql("ALTER STREAMING QUERY gap_live AS "
                        + GAP5.replace("FROM scores", "FROM scores_live"), spark).collect()
    assert [(r.name, r.version, r.from_frontier) for r in changed] == [
        ("gap_live", 2, "2015-09-01 12:06:20")]
    _catch_up("gap_live")
    assert _table(spark, "gap_live") == [
        ("k", 22, _t("12:00:30"), _t("12:09:00"), 0, "EARLY", False, _t("12:06:00"))]
    for f in sorted((paper_live.parent / "all").glob("*.parquet"))[3:]:
        shutil.copy2(f, paper_live / f.name)
    _catch_up("gap_live")
    assert _table(spark, "gap_live") == [
        ("k", 51, _t("12:00:30"), _t("12:12:50"), 0, "EARLY", False, _t("12:09:00"))]
    shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0]
    assert shown.versions == "v1 from the start; v2 from 2015-09-01 12:06:20"
    # the changed query is the one explained
    now = dfsql.sql("EXPLAIN FIRINGS FOR STREAMING QUERY gap_live", spark).collect()
    assert [(r.event, r.window_end) for r in now] == [("FIRE", _t("12:12:50")),
                                                      ("WAITING", _t("12:12:50"))]
    assert now[0].detail.endswith("emits total=51")
    dfsql.sql("STOP STREAMING QUERY gap_live", spark)


def _current(rows: list) -> list[tuple]:
    """The table a changelog leaves: each window's last row, none once retracted."""
    table: dict = {}
    for r in rows:
        k = (r.key, r.window_start, r.window_end)
        if r.is_retraction:
            table.pop(k, None)
        else:
            table[k] = tuple(v for n, v in r.asDict().items() if n != "is_retraction")
    return sorted(table.values(), key=repr)


def _staged(spark, tmp_path, seed: int, salt: int, stream: str, bounded: str):
    """A random workload in six files, the stream ``stream`` over the first few (a
    random cut) and the bounded view ``bounded`` of all its rows: (rows, the stream's
    directory, the files still to come)."""
    frame = _with_sentinel(_workload(seed))
    staged = tmp_path / "staged"
    _write_parts(frame, [int(x) for x in np.linspace(0, len(frame), 7)[1:-1]], staged)
    live = tmp_path / "live"
    live.mkdir()
    parts = sorted(staged.glob("*.parquet"))
    cut = int(np.random.default_rng(salt + seed).integers(1, len(parts) - 1))
    for f in parts[:cut]:
        shutil.copy2(f, live / f.name)
    schema = spark.read.parquet(str(staged)).schema
    spark.readStream.schema(schema).parquet(str(live)).createOrReplaceTempView(stream)
    spark.createDataFrame(frame, schema=schema).createOrReplaceTempView(bounded)
    return frame, live, parts[cut:]


def _changed(spark, name: str, queries: tuple[str, str], head: str, staged: tuple,
             views: tuple[str, str]) -> list:
    """The old query started over the stream (``head``: its INTO), changed to the new
    one, the rest of the files brought: the new query's bounded replay of every row,
    before the frontier."""
    old, new = queries
    live, rest, frame = staged
    _start(spark, name, old.format(t=views[0]), head)
    dfsql.sql(f"ALTER STREAMING QUERY {name} AS " + new.format(t=views[0]), spark)
    for f in rest:
        shutil.copy2(f, live / f.name)
    _catch_up(name)
    frontier = frame["arrival_time"].max().to_pydatetime().replace(tzinfo=None)
    return [r for r in dfsql.sql(new.format(t=views[1]), spark).collect()
            if r.emit_time < frontier]


@pytest.mark.parametrize("seed,before,after", [
    (31, ("SESSIONS(GAP 30 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT "
          "WATERMARK", "ACCUMULATING AND RETRACTING"),
     ("SESSIONS(GAP 40 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK",
      "ACCUMULATING AND RETRACTING")),
    (32, ("FIXED(1 MINUTE)", "REPEAT WATERMARK", "ACCUMULATING"),
     ("SLIDING(1 MINUTE, EVERY 30 SECONDS)", "AT WATERMARK EARLY EVERY 2 ROWS",
      "ACCUMULATING AND RETRACTING")),
])
def test_the_changed_table_is_the_new_querys_replay(spark, tmp_path, seed, before, after):
    """Random workloads in six files, the query changed after a random one: the table
    holds what the new query's replay of all the rows leaves before the frontier."""
    frame, live, rest = _staged(spark, tmp_path, seed, 500, "alter_src", "alter_all")
    old, new = (QUERY.format(window=w, trigger=t, emit=e) for w, t, e in (before, after))
    try:
        replay = _changed(spark, "alter_random", (old, new), "", (live, rest, frame),
                          ("alter_src", "alter_all"))
        got = sorted(_table(spark, "alter_random"), key=repr)
    finally:
        dfsql.sql("STOP STREAMING QUERY alter_random", spark)
        for v in ("alter_src", "alter_all"):
            spark.catalog.dropTempView(v)
    want = _current(replay)
    assert len(want) >= 3
    assert got == want


def test_refusals_leave_the_query_running_unchanged(spark, paper_live, tmp_path):
    """Each refusal is placed where its cause was written, and q goes on as it was."""
    from dfsql.continuous_queries import QUERIES

    query = FIG14.replace("FROM scores", "FROM scores_live")
    _start(spark, "kept_as_is", query)
    before = _table(spark, "kept_as_is")

    def refused(statement: str, message: str, at: tuple[int, int]) -> None:
        with pytest.raises(DfsqlError, match=message) as info:
            dfsql.sql(statement, spark)
        assert (info.value.line, info.value.column) == at, info.value
        assert QUERIES.running["kept_as_is"].query.isActive
        assert QUERIES.running["kept_as_is"].versions == ((1, None),)

    refused("ALTER STREAMING QUERY kept_as_is AS\n" + query.replace("SUM(value)", "SUM(nope)"),
            "nope", (2, 17))
    other = tmp_path / "other"
    shutil.copytree(paper_live, other)
    schema = spark.table("scores_live").schema
    spark.readStream.schema(schema).parquet(str(other)).createOrReplaceTempView("scores_other")
    refused("ALTER STREAMING QUERY kept_as_is AS\n"
            + query.replace("scores_live", "scores_other"), "reads scores_other", (2, 1))
    refused("ALTER STREAMING QUERY nobody AS " + query, "no continuous query named nobody",
            (1, 23))
    # on the engine's clock there is no order to replay what was read in
    refused("ALTER STREAMING QUERY kept_as_is AS " + query.replace(
        "WATERMARK FROM paper_watermarks", "WATERMARK DELAY 1 MINUTE").replace(
        "PROCESSING TIME arrival_time", ""), "needs the query's PROCESSING TIME", (1, 37))
    read = sorted(paper_live.glob("*.parquet"))[0]
    moved = tmp_path / read.name
    read.rename(moved)
    refused("ALTER STREAMING QUERY kept_as_is AS " + GAP5.replace("FROM scores",
                                                                  "FROM scores_live"),
            "file.s. the query read are gone", (1, 37))
    moved.rename(read)
    assert _table(spark, "kept_as_is") == before
    dfsql.sql("STOP STREAMING QUERY kept_as_is", spark)
    spark.catalog.dropTempView("scores_other")


def test_only_a_stream_of_files_can_change(spark):
    spark.readStream.format("rate").option("rowsPerSecond", 5).load() \
        .createOrReplaceTempView("ticks")
    ticking = ("SELECT COUNT(*) AS n FROM ticks WINDOW FIXED(1 MINUTE) ON timestamp "
               "PROCESSING TIME timestamp TRIGGER EVERY 5 ROWS")
    dfsql.sql(f"CREATE STREAMING QUERY ticking AS {ticking}", spark)
    with pytest.raises(DfsqlError, match="ticks cannot be read again") as info:
        dfsql.sql(f"ALTER STREAMING QUERY ticking AS {ticking.replace('5 ROWS', '9 ROWS')}",
                  spark)
    assert (info.value.line, info.value.column) == (1, 34)
    dfsql.sql("STOP STREAMING QUERY ticking", spark)
    spark.catalog.dropTempView("ticks")


def _signed(rows) -> dict:
    """Each window's signed sum of ``total`` over a retracting changelog (docs/reference.md#emit),
    windows that sum to nothing left out."""
    sums: dict = {}
    for r in rows:
        k = (r.key, r.window_start, r.window_end)
        sums[k] = sums.get(k, 0) + (-r.total if r.is_retraction else r.total)
    return {k: v for k, v in sums.items() if v}


def test_a_directory_is_restated_by_retractions_at_the_frontier(spark, paper_live, tmp_path):
    """Figure 14's query into a directory, its gap widened from 1 to 5 minutes at
    12:06:20 (the rows as in the table test above). By hand: the old query's three live
    sessions (5, 7 and 10, the paper's Figure 14) are retracted at 12:06:20, as the
    directory holds them; the new query's one live session [12:00:30,12:09:00) is added
    as 22, RESTATED. Then the new query's own panes: at 12:09 the 22 retracted and 51
    added for [12:00:30,12:12:50). Every row stays in Spark's file sink log: a reader of
    the directory sees them all, and the signed sum per window is the new query's."""
    out = tmp_path / "panes"
    query = FIG14.replace("FROM scores", "FROM scores_live")
    _start(spark, "gap_files", query, f" INTO DIRECTORY '{out}'")
    before = spark.read.parquet(str(out)).collect()
    assert sorted(_signed(before).values()) == [5, 7, 10]
    said: list[str] = []
    with listening(said.append):  # issue #51: what it does, while it does it
        dfsql.sql("ALTER STREAMING QUERY gap_files AS " + GAP5.replace(
            "FROM scores", "FROM scores_live"), spark)
    # the three minutes' files it read; the three live sessions retracted
    assert said == [
        "ALTER: checking the change: 3 file(s) of scores_live read so far, each still there",
        "ALTER: the changed query's history: 3 file(s) of scores_live read again",
        f"ALTER: restating directory {out}: retracting the running query's current rows",
        f"ALTER: restating directory {out}: 3 row(s) retracted, written with the changed query's "
        "first micro-batch",
        "ALTER: restating: the changed query replays what the running one read, as the "
        "state of the stream's first micro-batch (its panes reach the sink with that "
        "batch)"]
    _catch_up("gap_files")
    now = spark.read.parquet(str(out)).collect()
    restated = sorted((tuple(r) for r in now if r not in before), key=repr)
    last = {}  # each window's last row in the old changelog: its current row
    for r in sorted(before, key=lambda r: (r.emit_time, r.pane_index, r.is_retraction)):
        last[(r.key, r.window_start, r.window_end)] = r
    want = [(*tuple(r)[:-2], _t("12:06:20"), True) for r in last.values()
            if not r.is_retraction]
    assert sorted(r[1] for r in want) == [5, 7, 10]
    want.append(("k", 22, _t("12:00:30"), _t("12:09:00"), 0, "RESTATED", False,
                 _t("12:06:20"), False))
    assert restated == sorted(want, key=repr)
    assert _signed(now) == {("k", _t("12:00:30"), _t("12:09:00")): 22}
    for f in sorted((paper_live.parent / "all").glob("*.parquet"))[3:]:
        shutil.copy2(f, paper_live / f.name)
    _catch_up("gap_files")
    assert _signed(spark.read.parquet(str(out)).collect()) == {
        ("k", _t("12:00:30"), _t("12:12:50")): 51}
    shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0]
    assert shown.versions == "v1 from the start; v2 from 2015-09-01 12:06:20"
    # changed again: the log goes on from the second version's batches
    dfsql.sql("ALTER STREAMING QUERY gap_files AS " + FIG14.replace("FROM scores",
                                                                    "FROM scores_live"), spark)
    _catch_up("gap_files")
    # by hand, GAP 1 MINUTE over every row: the late 9 joined 5, 7, 8, 3, 4 and 3 into
    # one session (the paper's LATE 39), and 3, 8 and 1 (12:06:30 … 12:07:50) are another
    assert _signed(spark.read.parquet(str(out)).collect()) == {
        ("k", _t("12:00:30"), _t("12:05:00")): 39, ("k", _t("12:06:30"), _t("12:08:50")): 12}
    dfsql.sql("STOP STREAMING QUERY gap_files", spark)


@pytest.mark.parametrize("seed,before,after", [
    (41, ("SESSIONS(GAP 30 SECONDS)", "EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT "
          "WATERMARK"), ("SESSIONS(GAP 50 SECONDS)",
                    "AT WATERMARK EARLY EVERY 2 ROWS LATE EVERY 1 ROW")),
    (42, ("FIXED(1 MINUTE)", "REPEAT WATERMARK"),
     ("SLIDING(1 MINUTE, EVERY 30 SECONDS)", "EVERY 20 SECONDS")),
])
def test_a_changed_directory_sums_to_the_new_querys_replay(spark, tmp_path, seed, before,
                                                           after):
    """Random workloads in six files, the query into a directory changed after a random
    one, every window kept (a day's lateness, triggers that are never done: a window
    closed or expired before the change keeps the old query's rows, as the paper test
    shows): each window's signed sum over the
    directory is the new query's value in the replay of all the rows (its rows before
    the frontier, folded), and a window the new query does not have sums to nothing."""
    frame, live, rest = _staged(spark, tmp_path, seed, 600, "dir_src", "dir_all")
    old, new = (QUERY.format(window=w, trigger=t, emit="ACCUMULATING AND RETRACTING")
                .replace("LATENESS 60 SECONDS", "LATENESS 1 DAY") for w, t in (before, after))
    out = tmp_path / "panes"
    try:
        replay = _changed(spark, "dir_random", (old, new), f" INTO DIRECTORY '{out}'",
                          (live, rest, frame), ("dir_src", "dir_all"))
        got = _signed(spark.read.parquet(str(out)).collect())
    finally:
        dfsql.sql("STOP STREAMING QUERY dir_random", spark)
        for v in ("dir_src", "dir_all"):
            spark.catalog.dropTempView(v)
    want = {(r[0], r[6], r[7]): r[1] for r in _current(replay) if r[1]}
    assert len(want) >= 3
    assert got == want


def test_a_directory_changes_only_between_retracting_queries(spark, paper_live, tmp_path):
    query = FIG14.replace("FROM scores", "FROM scores_live")
    _start(spark, "into_files", query, f" INTO DIRECTORY '{tmp_path / 'panes'}'")
    gap5 = GAP5.replace("FROM scores", "FROM scores_live")
    for changed, message in (
            (gap5.replace("AND RETRACTING", ""), "EMIT ACCUMULATING: directory .* is restated"),
            (gap5.replace("SUM(value) AS total", "SUM(value) AS sum"), "columns differ")):
        with pytest.raises(DfsqlError, match=message) as info:
            dfsql.sql(f"ALTER STREAMING QUERY into_files AS {changed}", spark)
        assert (info.value.line, info.value.column) == (1, 37), info.value
    from dfsql.continuous_queries import QUERIES

    assert QUERIES.running["into_files"].query.isActive
    dfsql.sql("STOP STREAMING QUERY into_files", spark)
