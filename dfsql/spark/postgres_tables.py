"""A PostgreSQL table as Spark sees it (docs/guides/databases.md): its columns from the
database's catalog, and its rows read back as a bounded DataFrame.

One home for the two directions' vocabulary: a Spark type's PostgreSQL column type (the
sinks create tables with it) and a PostgreSQL column's Spark type (a read, a restatement
of the table by ALTER). The rows come in bulk (``COPY … TO STDOUT`` as CSV, parsed by
Arrow), never a row at a time; timestamps travel as microseconds since the epoch, so no
time zone or text format is guessed on the way."""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, Any

from dfsql.errors import NotSupportedError
from dfsql.language.scan import quoted_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import DataType

    from dfsql.connections import Connection

#: Spark's simple types and the PostgreSQL column types that hold their values exactly
SIMPLE = (("string", "text"), ("bigint", "bigint"), ("int", "integer"),
          ("smallint", "smallint"), ("boolean", "boolean"),
          ("double", "double precision"), ("float", "real"), ("date", "date"),
          ("timestamp", "timestamp with time zone"),
          ("timestamp_ntz", "timestamp without time zone"))
#: the other way: PostgreSQL's names (as ``format_type`` writes them) and Spark's
SPARK_OF = {**{pg: spark for spark, pg in SIMPLE}, "character varying": "string",
            "text": "string", "smallint": "smallint"}
#: tinyint has no PostgreSQL type of its own: smallint holds it
WIDER = {"tinyint": "smallint"}
TIMESTAMPS = ("timestamp with time zone", "timestamp without time zone")


def pg_type(dtype: DataType) -> str:
    """The PostgreSQL column type that holds a Spark type's values exactly."""
    from pyspark.sql import types as t

    name = dtype.simpleString()
    name = WIDER.get(name, name)
    for spark_name, pg in SIMPLE:
        if name == spark_name:
            return pg
    if isinstance(dtype, t.DecimalType):
        return f"numeric({dtype.precision},{dtype.scale})"
    raise NotSupportedError(f"a column of type {name} cannot go into a PostgreSQL table "
                            "yet", hint="cast it to STRING or a number in the SELECT")


def columns(cur: Any, schema: str, table: str) -> list[tuple[str, str]]:
    """The table's columns and their types as ``format_type`` writes them, in order
    ([]: no such table)."""
    cur.execute("SELECT a.attname, format_type(a.atttypid, a.atttypmod) FROM "
                "pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN "
                "pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = %s AND "
                "c.relname = %s AND a.attnum > 0 AND NOT a.attisdropped ORDER BY "
                "a.attnum", (schema, table))
    return [tuple(r) for r in cur.fetchall()]


def spark_type(pg: str) -> str:
    """The Spark type a PostgreSQL column is read as (text for a type Spark has none
    of: it is read as PostgreSQL writes it)."""
    if pg.startswith("numeric(") or pg.startswith("character varying"):
        return "string" if pg.startswith("character") else "decimal" + pg[len("numeric"):]
    return SPARK_OF.get(pg, "string")


def read_table(spark: SparkSession, connection: Connection, schema: str,
               table: str) -> DataFrame | None:
    """``schema.table`` of ``connection`` as a bounded DataFrame (None: no such table)."""
    conn = connection.connect()
    try:
        with conn.transaction(), conn.cursor() as cur:
            found = columns(cur, schema, table)
            if not found:
                return None
            data = io.BytesIO()
            with cur.copy(f"COPY (SELECT {_selected(found)} FROM {quoted(schema)}."
                          f"{quoted(table)}) TO STDOUT (FORMAT csv, HEADER true)") as copy:
                for chunk in copy:
                    data.write(chunk)
    finally:
        conn.close()
    return _frame(spark, found, data.getvalue())


def _selected(found: list[tuple[str, str]]) -> str:
    """Each column as it travels: a timestamp as microseconds, a type Spark lacks as
    text, the rest as itself."""
    out = []
    for name, pg in found:
        col = quoted(name)
        if pg in TIMESTAMPS:
            col = f"(extract(epoch FROM {col}) * 1000000)::bigint"
        elif spark_type(pg) == "string" and pg not in SPARK_OF:
            col = f"{col}::text"
        out.append(f"{col} AS {quoted(name)}")
    return ", ".join(out)


def _frame(spark: SparkSession, found: list[tuple[str, str]], data: bytes) -> DataFrame:
    """The CSV as Spark rows of the columns' Spark types: Arrow parses each column as
    it travelled and casts it to its type (a timestamp from its microseconds)."""
    import pyarrow as pa
    import pyarrow.csv as pacsv

    names = [n for n, _ in found]
    final = {n: _arrow_type(pg) for n, pg in found}
    travelled = {n: pa.int64() if pg in TIMESTAMPS else
                 pa.string() if pa.types.is_decimal(final[n]) else final[n]
                 for n, pg in found}
    rows = pacsv.read_csv(
        io.BytesIO(data),
        read_options=pacsv.ReadOptions(column_names=names, skip_rows=1),
        convert_options=pacsv.ConvertOptions(
            column_types=travelled, true_values=["t"], false_values=["f"],
            strings_can_be_null=True, quoted_strings_can_be_null=False))
    rows = pa.table([rows[n].cast(final[n]) for n in names], names=names)
    schema = ", ".join(f"{quoted_spark(n)} {spark_type(pg)}" for n, pg in found)
    return spark.createDataFrame(rows, schema)


def _arrow_type(pg: str) -> Any:
    """The Arrow type of a PostgreSQL column's values, as Spark reads it."""
    import pyarrow as pa

    if pg == "timestamp with time zone":
        return pa.timestamp("us", tz="UTC")
    if pg == "timestamp without time zone":
        return pa.timestamp("us")
    spark = spark_type(pg)
    if spark.startswith("decimal("):
        precision, scale = spark[len("decimal("):-1].split(",")
        return pa.decimal128(int(precision), int(scale))
    return {"bigint": pa.int64(), "int": pa.int32(), "smallint": pa.int16(),
            "boolean": pa.bool_(), "double": pa.float64(), "float": pa.float32(),
            "date": pa.date32()}.get(spark, pa.string())


def quoted(name: str) -> str:
    """A PostgreSQL identifier: every name that reaches SQL text goes through here (a
    column's name is the query's alias, which a client of the endpoint writes)."""
    return '"' + name.replace('"', '""') + '"'


def quoted_spark(name: str) -> str:
    return quoted_name(name)


def write_rows(connection: Connection, schema: str, table: str, rows: DataFrame,
               create: bool) -> tuple[str, str] | None:
    """``rows`` into ``schema.table`` in one transaction, in bulk (``COPY … FROM STDIN``):
    a new table of their columns (``create``; refused when it exists) or an existing one
    of the same columns and types, in order. A refusal is (message, hint), and nothing
    is written. The table has no primary key: the rows are a changelog, in which a
    window's panes and retractions repeat its key."""
    want = [(f.name, pg_type(f.dataType)) for f in rows.schema.fields]
    data = _csv(rows)
    where = f"{connection.name}.{schema}.{table}"
    conn = connection.connect()
    try:
        with conn.transaction(), conn.cursor() as cur:
            found = columns(cur, schema, table)
            if create and found:
                return (f"the table {where} already exists",
                        f"INSERT INTO {where} <query> adds rows to it")
            if not create and found != want:
                return (f"{where} has other columns than the query's rows" if found else
                        f"{where} is not a table", "want " + ", ".join(
                            f"{n} {t}" for n, t in want) + (
                            "" if found else f"; CREATE TABLE {where} AS <query> makes it"))
            target = f"{quoted(schema)}.{quoted(table)}"
            if create:
                cur.execute(f"CREATE TABLE {target} ("
                            + ", ".join(f"{quoted(n)} {t}" for n, t in want) + ")")
            names = ", ".join(quoted(n) for n, _ in want)
            with cur.copy(f"COPY {target} ({names}) FROM STDIN (FORMAT csv, HEADER "
                          "true)") as copy:
                copy.write(data)
    finally:
        conn.close()
    return None


def _csv(rows: DataFrame) -> bytes:
    """The rows as CSV for ``COPY`` (Arrow writes it: a null unquoted and empty, a
    string quoted, a timestamp with its zone)."""
    import pyarrow.csv as pacsv

    out = io.BytesIO()
    pacsv.write_csv(rows.toArrow(), out)
    return out.getvalue()
