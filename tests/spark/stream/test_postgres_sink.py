"""A live stream's results in a real PostgreSQL table, exactly once
(docs/guides/databases.md): :class:`~dfsql.spark.stream.postgres_sink.PostgresTable`
through the sink seam (``dfsql.start(sink=...)``).

Expected rows are Figure 14's changelog applied by hand (a retraction removes its
window's row, a pane replaces it), as the TableSink's test derives them."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

import dfsql
from dfsql.connections import Connections
from dfsql.errors import DatabaseError, DfsqlError
from dfsql.spark.stream.postgres_sink import PostgresTable
from tests.paper import FIGURES
from tests.postgres import running
from tests.spark.feeds import paper_events, with_sentinel, write_parts

FIG14 = FIGURES["fig14_sessions_retracting"]
UTC = timezone.utc


@pytest.fixture(scope="module")
def pg():
    with running() as server:
        yield server


@pytest.fixture(scope="module")
def conn(pg):
    return Connections().add("warehouse_db", pg.url())


def _fig14_current() -> set[tuple]:
    """Figure 14's changelog applied row by row: each live window's last total."""
    current: dict = {}
    for r in FIG14["expected"]:
        window = (r["key"], r["window_start"], r["window_end"])
        if r["is_retraction"]:
            current.pop(window, None)
        else:
            current[window] = r["total"]
    return {(k, datetime.strptime(s, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC),
             datetime.strptime(e, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC), t)
            for (k, s, e), t in current.items()}


def _rows(pg, table: str) -> set[tuple]:
    with pg.connect() as c:
        return {tuple(r) for r in c.execute(
            f"SELECT key, window_start, window_end, total FROM public.{table}")}


def _stream(spark, tmp_path, view: str):
    frame = with_sentinel(paper_events())
    # a file per arrival minute: the 9 that merges the first two sessions and the 8 that
    # joins them arrive in batches after theirs (retractions of merged sessions)
    write_parts(frame, [2, 5, 6, 8, 10], tmp_path / "in")
    (spark.readStream.schema(spark.read.parquet(str(tmp_path / "in")).schema)
     .option("maxFilesPerTrigger", 1).parquet(str(tmp_path / "in"))
     .createOrReplaceTempView(view))


def test_the_table_holds_the_current_row_of_every_live_window(spark, paper_tables, pg, conn,
                                                               tmp_path):
    _stream(spark, tmp_path, "fig14_pg")
    sink = PostgresTable(conn, "public", "fig14_current")
    q = dfsql.start(FIG14["query"].replace("FROM scores", "FROM fig14_pg"), sink=sink,
                    checkpoint=str(tmp_path / "ck"), trigger={"availableNow": True},
                    name="fig14_pg", spark=spark)
    q.awaitTermination()
    assert _rows(pg, "fig14_current") == _fig14_current()
    with pg.connect() as c:  # one progress row: the last of the 6 micro-batches
        assert c.execute("SELECT query, target, batch_id FROM public.dfsql_progress "
                         "WHERE target = 'fig14_current'").fetchall() == [
            ("fig14_pg", "fig14_current", 5)]
        key = c.execute("SELECT a.attname FROM pg_index i JOIN pg_attribute a ON "
                        "a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) WHERE "
                        "i.indrelid = 'public.fig14_current'::regclass AND i.indisprimary "
                        "ORDER BY a.attname").fetchall()
    assert [k for (k,) in key] == ["key", "window_end", "window_start"]
    sink.close()


def _batch(spark, rows):
    return spark.createDataFrame(rows, "key STRING, total BIGINT, window_start TIMESTAMP, "
                                 "window_end TIMESTAMP, pane_index BIGINT, pane_timing "
                                 "STRING, is_last BOOLEAN, emit_time TIMESTAMP, "
                                 "is_retraction BOOLEAN")


T = [datetime(2024, 1, 1, 0, m, tzinfo=UTC) for m in range(10)]


def _opened(spark, conn, table: str, query: str = "q") -> PostgresTable:
    sink = PostgresTable(conn, "public", table, query=query)
    sink.open(spark, _batch(spark, []).schema, ("key", "window_start", "window_end"), query)
    return sink


def test_a_replayed_batch_changes_nothing_and_a_new_sink_resumes(spark, pg, conn):
    sink = _opened(spark, conn, "replayed")
    early = ("a", 3, T[0], T[2], 0, "EARLY", False, T[1], False)
    sink.commit(_batch(spark, [early]), 0)
    # batch 1: the early pane retracted and replaced by the on-time one; b's first pane
    on_time = [("a", 3, T[0], T[2], 0, "EARLY", False, T[2], True),
               ("a", 5, T[0], T[2], 1, "ON_TIME", False, T[2], False),
               ("b", 7, T[0], T[2], 0, "ON_TIME", False, T[2], False)]
    sink.commit(_batch(spark, on_time), 1)
    want = {("a", T[0], T[2], 5), ("b", T[0], T[2], 7)}
    assert _rows(pg, "replayed") == want
    sink.commit(_batch(spark, on_time), 1)  # Spark replays the last batch after a crash
    sink.commit(_batch(spark, [early]), 0)
    assert _rows(pg, "replayed") == want
    again = _opened(spark, conn, "replayed")  # a restarted process
    assert again.last_batch == 1
    # b retracted without a successor: its row is deleted; a's stays (closed)
    again.commit(_batch(spark, [("b", 7, T[0], T[2], 0, "ON_TIME", False, T[3], True)]), 2)
    assert _rows(pg, "replayed") == {("a", T[0], T[2], 5)}
    sink.close()
    again.close()


def test_a_transaction_killed_before_its_commit_leaves_nothing(spark, pg, conn,
                                                              monkeypatch):
    """The database drops the sink's connection after the batch's COPY, before its
    COMMIT (a reader holds the table, so the sink waits at its DELETE; then its backend
    is terminated): nothing of the batch is in the table, and the batch applied again is
    applied once."""
    import threading

    import dfsql.spark.stream.postgres_sink as ps

    sink = _opened(spark, conn, "killed")
    sink.commit(_batch(spark, [("a", 1, T[0], T[2], 0, "EARLY", False, T[1], False)]), 0)
    pane = _batch(spark, [("a", 1, T[0], T[2], 0, "EARLY", False, T[2], True),
                          ("a", 4, T[0], T[2], 1, "ON_TIME", False, T[2], False)])
    pid = sink._conn.info.backend_pid
    monkeypatch.setattr(ps, "TRIES", 1)
    failed: list[BaseException] = []

    def commit() -> None:
        try:
            sink.commit(pane, 1)
        except DatabaseError as e:
            failed.append(e)

    with pg.connect() as holder:
        holder.autocommit = False
        holder.execute("LOCK TABLE public.killed IN ACCESS EXCLUSIVE MODE")
        worker = threading.Thread(target=commit)
        worker.start()
        with pg.connect() as watch:  # the sink's backend waiting on the lock: past COPY
            for _ in range(600):
                waiting = watch.execute("SELECT wait_event_type FROM pg_stat_activity "
                                        "WHERE pid = %s", (pid,)).fetchone()
                if waiting == ("Lock",):
                    break
                threading.Event().wait(0.1)
            assert waiting == ("Lock",)
            watch.execute("SELECT pg_terminate_backend(%s)", (pid,))
        worker.join(120)
        holder.rollback()
    assert failed and "lost at batch 1" in str(failed[0])
    assert _rows(pg, "killed") == {("a", T[0], T[2], 1)}
    resumed = _opened(spark, conn, "killed")
    assert resumed.last_batch == 0
    resumed.commit(pane, 1)
    resumed.commit(pane, 1)
    assert _rows(pg, "killed") == {("a", T[0], T[2], 4)}
    sink.close()
    resumed.close()


def test_the_database_restarted_mid_batch_is_tried_again(spark, pg, conn):
    sink = _opened(spark, conn, "restarted")
    sink.commit(_batch(spark, [("a", 1, T[0], T[2], 0, "EARLY", False, T[1], False)]), 0)
    pg.restart()
    sink.commit(_batch(spark, [("a", 2, T[0], T[2], 1, "EARLY", False, T[2], False)]), 1)
    assert _rows(pg, "restarted") == {("a", T[0], T[2], 2)}
    sink.close()


def test_a_table_of_other_columns_is_refused_before_anything_is_written(spark, pg, conn):
    with pg.connect() as c:
        c.execute("CREATE TABLE public.other (key text PRIMARY KEY, total bigint)")
        c.execute("INSERT INTO public.other VALUES ('x', 1)")
    with pytest.raises(DatabaseError) as info:
        _opened(spark, conn, "other")
    assert "warehouse_db.public.other has other columns" in str(info.value)
    assert "primary key (key, window_start, window_end)" in str(info.value)
    with pg.connect() as c:
        assert c.execute("SELECT * FROM public.other").fetchall() == [("x", 1)]


def test_a_refused_login_names_the_connection_never_the_password(spark, pg):
    with pg.connect() as c:
        c.execute("CREATE ROLE reader LOGIN PASSWORD 'right-horse-battery'")
    conn = Connections().add("guarded", pg.url("reader"), password="wrong-staple-42")
    with pytest.raises(DatabaseError) as info:
        _opened(spark, conn, "never")
    text = str(info.value)
    assert text.startswith("connection guarded (postgresql://reader@127.0.0.1:")
    assert "password authentication failed" in text
    assert "wrong-staple-42" not in text and "right-horse" not in text
    assert "wrong-staple-42" not in repr(conn)
    good = Connections().add("guarded", pg.url("reader"), password="right-horse-battery")
    with good.connect() as c:
        assert c.execute("SELECT current_user").fetchone() == ("reader",)


def test_a_user_without_create_on_the_schema_is_refused_at_the_table(spark, pg,
                                                                      scores_live):
    """The database's own refusal (no CREATE on a schema it does not own), at the table's
    name; no query is kept and no table made."""
    from dfsql.connections import CONNECTIONS

    with pg.connect() as c:
        c.execute("CREATE ROLE clerk LOGIN PASSWORD 'paper-clip-7'")
        c.execute("CREATE SCHEMA ledger")
        c.execute("GRANT USAGE ON SCHEMA ledger TO clerk")
    dfsql.connection("clerk_db", pg.url("clerk"), password="paper-clip-7")
    try:
        with pytest.raises(DfsqlError) as info:
            dfsql.sql(_create("clerk_db.ledger.sessions"), spark)
    finally:
        CONNECTIONS.remove("clerk_db")
    assert (info.value.line, info.value.column) == (2, 12)
    assert "permission denied for schema ledger" in info.value.message
    assert "paper-clip-7" not in str(info.value)
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
    with pg.connect() as c:
        assert c.execute("SELECT to_regclass('ledger.sessions')").fetchone() == (None,)


def test_a_database_down_at_create_is_refused_at_the_table(spark, pg, named, scores_live):
    """Down when the query is created (not after): a user's error, placed at the table's
    name, and no query is kept to start later."""
    pg.stop()
    try:
        with pytest.raises(DfsqlError) as info:
            dfsql.sql(_create("warehouse_db.public.while_down"), spark)
    finally:
        pg.start()
    assert (info.value.line, info.value.column) == (2, 12)
    assert info.value.message.startswith("connection warehouse_db (postgresql://dfsql@")
    assert "failed" in info.value.message
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
    with pg.connect() as c:
        assert c.execute("SELECT to_regclass('public.while_down')").fetchone() == (None,)


@pytest.fixture
def named(pg):
    """The connection ``warehouse_db`` named for this process's statements."""
    from dfsql.connections import CONNECTIONS

    dfsql.connection("warehouse_db", pg.url())
    yield "warehouse_db"
    CONNECTIONS.remove("warehouse_db")


@pytest.fixture
def scores_live(spark, paper_tables, tmp_path):
    from tests.conftest import paper_stream_dir

    src = paper_stream_dir(tmp_path / "scores")
    schema = spark.read.parquet(str(src)).schema
    spark.readStream.schema(schema).parquet(str(src)).createOrReplaceTempView("pg_scores")
    yield "pg_scores"
    spark.catalog.dropTempView("pg_scores")  # the session is shared with later modules


def _create(into: str) -> str:
    return (f"CREATE STREAMING QUERY fig14_into\nINTO TABLE {into}\nAS "
            + FIG14["query"].replace("FROM scores", "FROM pg_scores"))


def test_create_streaming_query_into_a_database_table(spark, pg, named, scores_live):
    from dfsql.continuous_queries import QUERIES

    created = dfsql.sql(_create("warehouse_db.public.`fig14 into`"), spark).collect()
    try:
        assert [(r.name, r.sink) for r in created] == [
            ("fig14_into", "table warehouse_db.public.fig14 into")]
        QUERIES.running["fig14_into"].query.processAllAvailable()
        assert _rows(pg, '"fig14 into"') == _fig14_current()
        shown = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()
        assert [(r.name, r.sink) for r in shown] == [
            ("fig14_into", "table warehouse_db.public.fig14 into")]
    finally:
        dfsql.sql("STOP STREAMING QUERY fig14_into", spark)


@pytest.mark.parametrize(("into", "at", "says"), [
    ("nowhere.public.t", (2, 12), "nowhere is not a connection"),
    ("warehouse_db.public.other_columns", (2, 12),
     "warehouse_db.public.other_columns has other columns"),
    ("t", (2, 12), "a database table is NAME.schema.table or NAME.table"),
])
def test_a_wrong_database_table_is_a_positioned_error_and_starts_nothing(
        spark, pg, named, scores_live, into, at, says):
    with pg.connect() as c:
        c.execute("CREATE TABLE IF NOT EXISTS public.other_columns (key text PRIMARY KEY)")
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(_create(into), spark)
    assert (info.value.line, info.value.column) == at
    assert says in info.value.message
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
    assert not [q for q in spark.streams.active if q.name == "fig14_into"]


@pytest.mark.parametrize("into", ["warehouse_db.public.keyless", ""])  # "": Spark's own
def test_a_group_key_left_out_of_the_select_is_refused_for_a_table_of_current_rows(
        spark, pg, named, scores_live, into):
    """A table keeps one row per group key and window: with the key not selected, k1's
    and k2's windows would be one row. Refused at the key in GROUP BY (line 5, column 10
    of the statement), before the database table is made; a changelog keeps every row
    and takes the same query."""
    query = _create(into).replace("SELECT key, ", "SELECT ")
    with pytest.raises(DfsqlError) as info:
        dfsql.sql(query, spark)
    assert (info.value.line, info.value.column) == (5, 10)
    assert "the group key key is not in the SELECT list" in info.value.message
    assert "INTO CHANGELOG" in info.value.hint
    assert [r.name for r in dfsql.sql("SHOW STREAMING QUERIES", spark).collect()] == []
    with pg.connect() as c:
        assert c.execute("SELECT to_regclass('public.keyless')").fetchone() == (None,)
    if into.startswith("warehouse_db"):
        logged = query.replace("INTO TABLE", "INTO CHANGELOG").replace("keyless", "keyless_log")
        dfsql.sql(logged, spark)
        dfsql.sql("STOP STREAMING QUERY fig14_into", spark)


def test_create_streaming_query_into_a_changelog(spark, pg, named, scores_live):
    """Every row of Figure 14's changelog appended, with its batch and its place in it:
    the rows are the figure's emitted rows (hand-derived from the paper), and applied in
    (batch_id, batch_row) order they leave the figure's current rows."""
    from dfsql.continuous_queries import QUERIES

    created = dfsql.sql(_create("warehouse_db.fig14_log").replace(
        "INTO TABLE", "INTO CHANGELOG"), spark).collect()
    try:
        assert [r.sink for r in created] == ["changelog warehouse_db.public.fig14_log"]
        QUERIES.running["fig14_into"].query.processAllAvailable()
    finally:
        dfsql.sql("STOP STREAMING QUERY fig14_into", spark)
    with pg.connect() as c:
        rows = c.execute("SELECT key, total, window_start, window_end, is_retraction, "
                         "batch_id, batch_row FROM public.fig14_log "
                         "ORDER BY batch_id, batch_row").fetchall()
    want = sorted((r["key"], r["total"], r["window_start"], r["window_end"],
                   r["is_retraction"]) for r in FIG14["expected"]
                  if r["emit_time"] is not None)
    fmt = "%Y-%m-%d %H:%M:%S"
    assert sorted((k, t, s.strftime(fmt), e.strftime(fmt), x)
                  for k, t, s, e, x, _, _ in rows) == want
    current: dict = {}
    for k, t, s, e, x, _, _ in rows:
        if x:
            current.pop((k, s, e), None)
        else:
            current[(k, s, e)] = t
    assert {(k, s, e, t) for (k, s, e), t in current.items()} == _fig14_current()


def test_a_column_named_like_sql_is_only_a_name(spark, pg, conn):
    """A column's name is the query's alias, which an endpoint client writes: a quote or
    a placeholder-like text in it stays part of the name (never SQL)."""
    odd = 'to"tal); DROP TABLE public.keep; -- {target}'
    with pg.connect() as c:
        c.execute("CREATE TABLE public.keep (x int)")
    batch = _batch(spark, [("a", 3, T[0], T[2], 0, "EARLY", False, T[1], False)]
                   ).withColumnRenamed("total", odd)
    sink = PostgresTable(conn, "public", "odd names", query="odd")
    sink.open(spark, batch.schema, ("key", "window_start", "window_end"), "odd")
    sink.commit(batch, 0)
    sink.close()
    quoted = '"' + odd.replace('"', '""') + '"'
    with pg.connect() as c:
        assert c.execute(f'SELECT key, {quoted} FROM public."odd names"').fetchall() == [
            ("a", 3)]
        assert c.execute("SELECT to_regclass('public.keep')").fetchone() == ("keep",)


def test_a_database_down_mid_stream_is_shown_retrying_and_nothing_is_lost(
        spark, pg, named, paper_live):
    """The database stops after the query's first micro-batches: the next batch's
    transaction fails, SHOW lists the query RETRYING with the try and what the database
    said, and once the database is back the batch commits once; the table ends as
    Figure 14's current rows."""
    import shutil
    import time

    from dfsql.continuous_queries import QUERIES

    dfsql.sql("CREATE STREAMING QUERY fig14_down INTO TABLE warehouse_db.public.down AS "
              + FIG14["query"].replace("FROM scores", "FROM scores_live"), spark)
    try:
        QUERIES.running["fig14_down"].query.processAllAvailable()
        pg.stop("immediate")
        for f in sorted((paper_live.parent / "all").glob("*.parquet"))[3:]:
            shutil.copy2(f, paper_live / f.name)
        status = ""
        for _ in range(1200):  # the batch's first try fails within seconds
            status = dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0].status
            if status.startswith("RETRYING"):
                break
            time.sleep(0.05)
        assert status.startswith("RETRYING table warehouse_db.public.down: batch ")
        assert " try 2 of 6 in 0.5 s: " in status or " try 3 of 6 in 1 s: " in status
        pg.start()
        QUERIES.running["fig14_down"].query.processAllAvailable()
        assert dfsql.sql("SHOW STREAMING QUERIES", spark).collect()[0].status == "RUNNING"
        assert _rows(pg, "down") == _fig14_current()
    finally:
        if not pg.running():
            pg.start()
        dfsql.sql("STOP STREAMING QUERY fig14_down", spark)


def _global_rows(pg, table: str) -> list[tuple]:
    with pg.connect() as c:
        return sorted(tuple(r) for r in c.execute(
            f"SELECT key, total, window_start, window_end FROM public.{table}"))


def test_a_global_window_is_keyed_by_its_group_keys_alone(spark, pg, conn):
    """GLOBAL's window columns are NULL (docs/reference.md#output-columns): the row of
    key a is its group key's alone, replaced by its next pane; without GROUP BY the
    table holds one row."""
    keyed = PostgresTable(conn, "public", "global_keyed", query="g")
    keyed.open(spark, _batch(spark, []).schema, ("key",), "g")
    keyed.commit(_batch(spark, [("a", 3, None, None, 0, "EARLY", False, T[1], False),
                                ("b", 1, None, None, 0, "EARLY", False, T[1], False)]), 0)
    keyed.commit(_batch(spark, [("a", 3, None, None, 0, "EARLY", False, T[2], True),
                                ("a", 8, None, None, 1, "EARLY", False, T[2], False)]), 1)
    assert _global_rows(pg, "global_keyed") == [("a", 8, None, None), ("b", 1, None, None)]
    keyed.close()
    one = PostgresTable(conn, "public", "global_one", query="g1")
    one.open(spark, _batch(spark, []).schema, (), "g1")
    one.commit(_batch(spark, [("-", 3, None, None, 0, "EARLY", False, T[1], False)]), 0)
    one.commit(_batch(spark, [("-", 3, None, None, 0, "EARLY", False, T[2], True),
                              ("-", 9, None, None, 1, "EARLY", False, T[2], False)]), 1)
    one.commit(_batch(spark, []), 2)  # an empty batch changes nothing
    assert _global_rows(pg, "global_one") == [("-", 9, None, None)]
    one.close()


def test_a_null_group_key_is_refused_and_nothing_of_its_batch_is_written(spark, pg, conn):
    sink = _opened(spark, conn, "null_key")
    sink.commit(_batch(spark, [("a", 1, T[0], T[2], 0, "EARLY", False, T[1], False)]), 0)
    with pytest.raises(DatabaseError) as info:
        sink.commit(_batch(spark, [("a", 1, T[0], T[2], 0, "EARLY", False, T[2], True),
                                   (None, 4, T[0], T[2], 0, "EARLY", False, T[2], False)]), 1)
    assert "a row whose key is NULL cannot be in the table" in info.value.message
    assert "COALESCE(key" in info.value.hint
    assert _rows(pg, "null_key") == {("a", T[0], T[2], 1)}
    with pg.connect() as c:
        assert c.execute("SELECT batch_id FROM public.dfsql_progress WHERE target = "
                         "'null_key'").fetchone() == (0,)
    sink.close()
