"""The column-based row set encoded straight from Arrow is, byte for byte, what Thrift's
own codec writes for the same rows as structs (two paths, one answer), and a client
decodes it back to the values it came from."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st
from thrift.protocol import TBinaryProtocol
from thrift.transport import TTransport

from dfsql.server import rowsets
from dfsql.server.tcli import TCLIService, encode
from dfsql.server.tcli import ttypes as tt

_TYPES = {
    "bool": (pa.bool_(), st.booleans()),
    "tinyint": (pa.int8(), st.integers(-(2**7), 2**7 - 1)),
    "smallint": (pa.int16(), st.integers(-(2**15), 2**15 - 1)),
    "int": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "bigint": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "double": (pa.float64(), st.floats(allow_nan=False)),
    "float": (pa.float32(), st.floats(width=32, allow_nan=False)),
    "string": (pa.string(), st.text(max_size=12)),
    "large_string": (pa.large_string(), st.text(max_size=12)),
    "binary": (pa.binary(), st.binary(max_size=12)),
    "date": (pa.date32(), st.dates()),  # cast to its text, as wire_frame does in Spark
}


@st.composite
def tables(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(_TYPES)), min_size=1, max_size=5))
    n = draw(st.integers(0, 40))
    cols = {}
    for i, kind in enumerate(kinds):
        typ, values = _TYPES[kind]
        cols[f"c{i}"] = pa.array(draw(st.lists(st.none() | values, min_size=n, max_size=n)), typ)
    table = pa.table(cols)
    # a slice: Arrow buffers with an offset, as the server's fetches cut them
    lo = draw(st.integers(0, n))
    return table.slice(lo, draw(st.integers(0, n - lo)))


@settings(max_examples=300, deadline=None)
@given(tables(), st.integers(0, 2**40))
def test_encoded_row_set_is_what_thrifts_codec_writes(table, offset) -> None:
    assert rowsets.encoded_row_set(table, offset) == encode(rowsets.row_set(table, offset, True))
    # and the whole reply around it
    want = TCLIService.FetchResults_result(success=tt.TFetchResultsResp(
        status=tt.TStatus(statusCode=tt.TStatusCode.SUCCESS_STATUS),
        hasMoreRows=table.num_rows > 0, results=rowsets.row_set(table, offset, True)))
    assert rowsets.encoded_fetch_result(table, offset) == encode(want)


def test_a_decoded_fetch_gives_back_the_values_and_nulls() -> None:
    table = pa.table({"id": pa.array([1, None, -3], pa.int64()),
                      "s": pa.array(["a", None, "héllo"]),
                      "b": pa.array([None, True, False])})
    # the columns themselves, through the pure-Python decoder a client like PyHive uses
    raw = rowsets.encoded_row_set(table, 5)
    got = tt.TRowSet()
    got.read(TBinaryProtocol.TBinaryProtocol(TTransport.TMemoryBuffer(raw)))
    assert got.startRowOffset == 5 and got.rows == [] and got.columnCount == 3
    ids, strings, bools = got.columns
    assert ids.i64Val.values == [1, 0, -3] and ids.i64Val.nulls == b"\x02"
    assert strings.stringVal.values == ["a", "", "héllo"] and strings.stringVal.nulls == b"\x02"
    assert bools.boolVal.values == [False, True, False] and bools.boolVal.nulls == b"\x01"
