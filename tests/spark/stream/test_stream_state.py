"""The streaming executor's state, driven in memory (no Spark): the bucket processor is
given micro-batches as Spark would give them (packed per bucket), with a dict-backed
ValueState. State must stay bounded by the live windows, and the rows must not depend on
where the stream is cut."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa
from in_process import MemoryState

from dfsql.language import parse_statement
from dfsql.language.rewrite import rewrite
from dfsql.spark.stream import plan as S

QUERY = ("SELECT key, SUM(value) AS total, COUNT(*) AS n FROM t GROUP BY key "
         "WINDOW SESSIONS(GAP 30 SECONDS) ON event_time WATERMARK DELAY 10 SECONDS "
         "PROCESSING TIME arrival_time ALLOWED LATENESS 60 SECONDS "
         "TRIGGER EVERY 10 SECONDS UNTIL WATERMARK THEN REPEAT WATERMARK "
         "EMIT ACCUMULATING AND RETRACTING")


def _processor(buckets: int):
    stmt = parse_statement(QUERY)
    block = stmt.blocks[-1]
    st = rewrite(block, stmt.source)
    assert [sql for sql, _ in st.aggregates] == ["SUM(__c0)", "COUNT(*)"]
    aggs = [("__a0", "sum", "__c0"), ("__a1", "count", None)]
    out = ["__k0", "__a0", "__a1", "window_start", "window_end", "pane_index", "pane_timing",
           "is_last", "emit_time", "is_retraction", "__sort_rank",
           S.ROW_KIND, *S.STATS_FIELDS]
    procs = []
    for _ in range(buckets):
        p = S.BucketProcessor(block.clauses, ["__k0"], ["__c0"], aggs, out)
        p.state = MemoryState()
        procs.append(p)
    return procs


def _events(n: int, seed: int) -> pd.DataFrame:
    """20 keys over an hour, bursts of a few seconds apart (sessions merge), arrivals up to
    20 s late and 3 % a few minutes late (dropped beyond the lateness)."""
    rng = np.random.default_rng(seed)
    s = 1_000_000
    et = np.sort(rng.integers(0, 3600, n)) * s
    delay = rng.integers(0, 20, n) * s
    delay[rng.random(n) < 0.03] += 240 * s
    at = et + delay
    o = np.argsort(at, kind="stable")
    return pd.DataFrame({"__k0": rng.choice([f"k{i}" for i in range(20)], n)[o],
                         "__c0": rng.integers(1, 10, n)[o],
                         "__et": pd.array(et[o], dtype="Int64"), "__at": at[o]})


def _run(events: pd.DataFrame, cuts: list[int], buckets: int = 3):
    procs = _processor(buckets)
    bucket = events["__k0"].map(lambda k: int(k[1:]) % buckets).astype("int32")
    rows, retained = [], []
    bounds = [0, *cuts, len(events)]
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        part = events.iloc[a:b].assign(**{S.BUCKET: bucket.iloc[a:b]})
        table = pa.Table.from_pandas(part, preserve_index=False)
        packed = pa.Table.from_batches(list(S.Packer(buckets)(table.to_batches()))).to_pandas()
        for i, group in packed.groupby(S.BUCKET):
            rows += [o for o in procs[i].handleInputRows((i,), iter([group]))]
        retained.append(sum(len(p._load()[0]) if p._load()[0] is not None else 0
                            for p in procs))
    panes = [r[r[S.ROW_KIND] != S.STATS]  # each call's metrics row
             .drop(columns=["__sort_rank", S.ROW_KIND, *S.STATS_FIELDS]) for r in rows]
    return pd.concat([p for p in panes if not p.empty], ignore_index=True), retained


def _rows(df: pd.DataFrame) -> list:
    return sorted(map(tuple, df.astype(str).to_numpy().tolist()))


def test_state_stays_bounded_by_the_live_windows() -> None:
    """3000 elements over an hour in 60 micro-batches: what a bucket keeps is the few
    sessions the watermark has not passed (+60 s lateness), never the history."""
    events = _events(3000, seed=5)
    cuts = list(range(50, len(events), 50))
    out, retained = _run(events, cuts)
    assert len(out) > 1000 and out["is_retraction"].any()
    # 3000 elements over 3600 s: ~0.8 arrive per second; live windows span ≲ 2 minutes
    assert max(retained[5:]) < 300, retained
    assert retained[-1] < 300


def test_rows_do_not_depend_on_where_the_stream_is_cut() -> None:
    events = _events(1500, seed=9)
    rng = np.random.default_rng(9)
    one, _ = _run(events, [len(events) - 1])
    frontier = int(events["__at"].iloc[-1])
    for _ in range(3):
        cuts = sorted(rng.choice(np.arange(1, len(events) - 1), 12, replace=False).tolist())
        many, _ = _run(events, [*cuts, len(events) - 1])
        assert _rows(many) == _rows(one)
    assert (one["emit_time"] < frontier).all()
