"""Parquet that pandas wrote: nanosecond timestamps, read as Spark's timestamps.

pandas (through pyarrow, Parquet format 2.6) writes ``datetime64[ns]`` columns as INT64
``TIMESTAMP(NANOS)``, which Spark refuses (``[PARQUET_TYPE_ILLEGAL]``): Spark holds
microseconds. :func:`read_parquet` reads such a column as its count of nanoseconds (Spark's
``spark.sql.legacy.parquet.nanosAsLong``, in force only while the file's schema is read)
and converts it: a time-zone-aware column (``isAdjustedToUTC``) to a TIMESTAMP, a naive one
to a TIMESTAMP_NTZ — what Spark reads from the same data written in microseconds — with
the nanoseconds below a microsecond cut off (rounded down). Only top-level columns are
converted; a timestamp inside a struct or array stays as Spark reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dfsql.session import session, setting_while

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


def first_parquet_file(path: Path) -> Path | None:
    """The file whose schema Spark would read first (a file, or the first data file of
    a directory, hidden and ``_`` files left out, as Spark leaves them)."""
    if path.is_file():
        return path
    files = sorted(f for f in path.rglob("*") if f.is_file()
                   and not any(part.startswith((".", "_")) for part in
                               f.relative_to(path).parts))
    return files[0] if files else None


def nanosecond_columns(path: Path) -> dict[str, bool]:
    """The top-level INT64 TIMESTAMP(NANOS) columns of the file (or directory) at
    ``path``, each with whether it is adjusted to UTC (pandas: time-zone aware). Only
    the footer is read."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    first = first_parquet_file(path)
    if first is None:
        return {}
    try:
        schema = pq.read_schema(first)
    except (pa.ArrowException, OSError):  # not Parquet: Spark's own reader says so
        return {}
    return {f.name: f.type.tz is not None for f in schema
            if pa.types.is_timestamp(f.type) and f.type.unit == "ns"}


def read_parquet(path: str | Path, spark: SparkSession | None = None, *,
                 stream: bool = False) -> DataFrame:
    """A Parquet file or directory as a DataFrame (with ``stream``, a streaming one over
    the directory, its schema read from the files already there), its nanosecond
    timestamps read as TIMESTAMP (time-zone aware) or TIMESTAMP_NTZ (naive) columns."""
    spark = spark or session()
    p = Path(path).expanduser()
    nanos = nanosecond_columns(p)
    if not nanos:
        df = spark.read.parquet(str(p))
        return spark.readStream.schema(df.schema).parquet(str(p)) if stream else df
    with setting_while(spark, NANOS_AS_LONG, "true"):
        df = spark.read.parquet(str(p))
        df.schema  # noqa: B018 - the schema is read now, with the setting in force
    if stream:
        df = spark.readStream.schema(df.schema).parquet(str(p))
    return as_timestamps(df, nanos)


def as_timestamps(df: DataFrame, nanos: dict[str, bool]) -> DataFrame:
    """``df`` with its nanosecond counts (BIGINT) named in ``nanos`` as timestamps: a
    TIMESTAMP where the column was adjusted to UTC, else a TIMESTAMP_NTZ (the wall-clock
    time, whatever the session's time zone), in the columns' own places."""
    from pyspark.sql import functions as F  # noqa: N812

    from dfsql.language.scan import quoted_name

    cols = []
    for name in df.columns:
        q = quoted_name(name)
        if name not in nanos:
            cols.append(F.col(q))
            continue
        micros = f"({q} - pmod({q}, 1000)) div 1000"  # rounded down, in integers
        sql = (f"timestamp_micros({micros})" if nanos[name] else
               f"timestampadd(MICROSECOND, {micros}, TIMESTAMP_NTZ'1970-01-01 00:00:00')")
        cols.append(F.expr(sql).alias(name))
    return df.select(*cols)
