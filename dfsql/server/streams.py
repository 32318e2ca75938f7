"""``dfsql serve --stream NAME=DIR``: the files arriving in a directory as a streaming
view in every client session. A continuous query's record (:mod:`dfsql.server.state`)
keeps the registrations it reads, schema included, so that a restart plans it again
whatever the server's flags are then."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

FORMATS = (".parquet", ".json", ".csv")


@dataclass(frozen=True)
class StreamView:
    name: str
    path: str
    format: str  # parquet | json | csv

    def register(self, spark: SparkSession, schema_json: str | None = None) -> None:
        """The view ``name`` in ``spark``: a file stream over ``path``; its schema read
        from the files there unless given (as ``StructType.json()``)."""
        from pyspark.sql.types import StructType

        if schema_json is not None:
            schema = StructType.fromJson(json.loads(schema_json))
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
    """``NAME=DIR`` pairs as stream views; DIR must hold a file to read the schema from."""
    views = []
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep or not name or not path:
            raise DfsqlError(f"--stream {spec!r}: expected NAME=DIRECTORY",
                             hint="e.g. --stream clicks_live=/data/clicks")
        files = sorted(p for p in Path(path).glob("*") if p.suffix in FORMATS)
        if not files:
            raise DfsqlError(f"--stream {name}: no .parquet, .json or .csv file in {path}",
                             hint="the stream's schema is read from the files already there")
        views.append(StreamView(name, str(Path(path).resolve()), files[0].suffix[1:]))
    return views
