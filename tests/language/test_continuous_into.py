"""CREATE STREAMING QUERY's ``INTO TABLE NAME.schema.table`` (docs/guides/databases.md):
the target's names as written, ``NAME.table`` in schema ``public``, and the refusals,
positioned at the name."""

from __future__ import annotations

import pytest

from dfsql.errors import DfsqlSyntaxError
from dfsql.language.continuous import parse_any

HEAD = "CREATE STREAMING QUERY q INTO TABLE "


@pytest.mark.parametrize(("into", "target"), [
    ("wh.sales.totals", ("wh", "sales", "totals")),
    ("wh.totals", ("wh", "public", "totals")),
    ("`my wh`.`a-b`.`t t`", ("my wh", "a-b", "t t")),
])
def test_the_target_as_written(into, target):
    stmt = parse_any(f"{HEAD}{into} CHECKPOINT '/ck' AS SELECT 1")
    assert (stmt.sink, stmt.target, stmt.target_offset) == ("database", target, len(HEAD))
    assert stmt.checkpoint == "/ck"


def test_into_table_alone_is_spark_s_table():
    stmt = parse_any(f"{HEAD}AS SELECT 1")
    assert (stmt.sink, stmt.target) == ("table", None)


@pytest.mark.parametrize("into", ["totals", "wh.a.b.c", "wh..t"])
def test_a_target_that_is_not_name_schema_table(into):
    with pytest.raises(DfsqlSyntaxError) as info:
        parse_any(f"{HEAD}{into} AS SELECT 1")
    assert (info.value.line, info.value.column) == (1, len(HEAD) + 1)
    assert info.value.message == "a database table is NAME.schema.table or NAME.table"
