"""``dfsql serve --stream NAME=DIR``: the files arriving in a directory as a streaming
view in every client session; ``NAME=DIR FORMAT (COLUMNS)`` gives the schema, so DIR
may have no file yet. A continuous query's record (:mod:`dfsql.server.state`)
keeps the registrations it reads, schema included, so that a restart plans it again
whatever the server's flags are then."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.types import StructType

FORMATS = (".parquet", ".json", ".csv")


#: ``NAME=DIR FORMAT (COLUMNS)``'s tail: the format and the columns, as in CREATE TABLE
COLUMNS_GIVEN = re.compile(r"(?P<path>.+?)\s+(?P<format>[A-Za-z]+)\s*\((?P<columns>.*)\)\s*$",
                           re.S)
#: what looks like the start of that tail, closed or not
COLUMNS_OPENED = re.compile(r"\s[A-Za-z]+\s*\(")


@dataclass(frozen=True)
class StreamView:
    name: str
    path: str
    format: str  # parquet | json | csv
    #: the columns as given (Spark's DDL: ``key STRING, value INT``); None: read from the
    #: files in ``path``
    schema: str | None = None

    def struct(self, spark: SparkSession) -> StructType | None:
        """The columns given, as Spark reads them; a list Spark cannot read is the user's
        mistake, said as one."""
        if self.schema is None:
            return None
        from pyspark.errors import PySparkException

        try:
            return spark.createDataFrame([], self.schema).schema
        except PySparkException as e:
            first = str(e).strip().splitlines()[0]
            raise DfsqlError(f"--stream {self.name}: the columns ({self.schema}) are not "
                             f"a column list Spark reads: {first}",
                             hint="name and type each: (key STRING, value INT, event_time "
                                  "TIMESTAMP)") from None

    def register(self, spark: SparkSession, schema_json: str | None = None) -> None:
        """The view ``name`` in ``spark``: a file stream over ``path``; its schema the one
        given (as ``StructType.json()``: a restart's record), else the columns of the
        flag, else read from the files there."""
        from pyspark.sql.types import StructType

        if schema_json is not None:
            schema = StructType.fromJson(json.loads(schema_json))
        elif self.schema is not None:
            schema = self.struct(spark)
        else:
            reader = spark.read.format(self.format)
            if self.format == "csv":
                reader = reader.option("header", True).option("inferSchema", True)
            schema = reader.load(self.path).schema
        stream = spark.readStream.format(self.format).schema(schema)
        if self.format == "csv":
            stream = stream.option("header", True)
        stream.load(self.path).createOrReplaceTempView(self.name)


def parse_streams(specs: list[str]) -> list[StreamView]:
    """``NAME=DIR`` (the schema read from a file in DIR) or ``NAME=DIR FORMAT (COLUMNS)``
    (DIR may be empty: Spark needs a file only to infer the schema) as stream views."""
    views = []
    for spec in specs:
        name, sep, rest = spec.partition("=")
        if not sep or not name or not rest:
            raise DfsqlError(f"--stream {spec!r}: expected NAME=DIRECTORY",
                             hint="e.g. --stream clicks_live=/data/clicks")
        views.append(_view(name, rest.strip()))
    return views


def _view(name: str, rest: str) -> StreamView:
    """One ``--stream``'s view: ``rest`` is what follows ``NAME=``."""
    given = COLUMNS_GIVEN.match(rest)
    if given is None and COLUMNS_OPENED.search(rest) and not Path(rest).is_dir():
        raise DfsqlError(f"--stream {name}: the columns' parentheses are not closed",
                         hint=f"--stream '{name}=DIR json (key STRING, event_time "
                              "TIMESTAMP)'")
    if given is not None and not Path(rest).is_dir():
        path, fmt, columns = given["path"], given["format"].lower(), given["columns"]
        if f".{fmt}" not in FORMATS:
            raise DfsqlError(f"--stream {name}: {given['format']} is not a format the "
                             "stream reads", hint="the format is parquet, json or csv")
        if columns.count("(") != columns.count(")"):
            raise DfsqlError(f"--stream {name}: the columns' parentheses do not match",
                             hint="(key STRING, price DECIMAL(10, 2))")
        if not Path(path).is_dir():
            raise DfsqlError(f"--stream {name}: {path} is not a directory",
                             hint="create it first: the stream reads the files that "
                                  "arrive in it")
        return StreamView(name, str(Path(path).resolve()), fmt, columns.strip())
    files = sorted(p for p in Path(rest).glob("*") if p.suffix in FORMATS)
    if not files:
        raise DfsqlError(f"--stream {name}: no .parquet, .json or .csv file in {rest}",
                         hint="the columns can only be read from a file there: put one "
                              "in first, or give the format and the columns: --stream "
                              f"'{name}={rest} json (key STRING, event_time TIMESTAMP)'")
    return StreamView(name, str(Path(rest).resolve()), files[0].suffix[1:])
