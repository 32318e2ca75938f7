"""The shell's backslash commands that read or show something outside the session's
state: ``\\help`` (the commands, and a section of the shipped reference), ``\\d`` (the
tables, or one table's columns and registration) and ``\\load``'s words and the files it
reads. :class:`~dfsql.shell.repl.Shell` dispatches to them with its console and its
Spark session; a mistake in a command is a :class:`ShellError`, positioned in the
command's line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dfsql.connections import CONNECTIONS, parse
from dfsql.errors import DfsqlError
from dfsql.shell import display
from dfsql.shell import reference_help as docs_help
from dfsql.shell.lexer import COMMANDS
from dfsql.spark.catalog.parquet import read_parquet
from dfsql.spark.errors import spark_errors

if TYPE_CHECKING:
    from rich.console import Console

LOAD_USAGE = "\\load NAME PATH [STREAM] [EVENT TIME col] [PROCESSING TIME col] " \
             "[WATERMARK DELAY 10 SECONDS]"


class ShellError(DfsqlError):
    """A mistake in a backslash command (positioned in the command's line)."""


def show_help(out: Console, rest: str, at: int) -> None:
    """``\\help`` lists the commands and the reference's topics; ``\\help WINDOW``
    prints that section of the shipped reference (:mod:`dfsql.shell.reference_help`)."""
    from rich.table import Table

    if rest:
        text = docs_help.section(rest)
        if text is None:
            raise ShellError(docs_help.unknown_topic(rest), 1, at + 1,
                             "\\help alone lists the commands and the topics")
        if out.is_terminal:
            from rich.markdown import Markdown

            out.print(Markdown(text))
        else:
            out.print(text, end="", markup=False, highlight=False, soft_wrap=True)
        return
    table = Table(box=None, show_header=False, pad_edge=False)
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column()
    for cmd, text in COMMANDS.items():
        table.add_row(cmd, text)
    out.print("End a statement with ';'. Enter continues it on a new line; "
              "Esc Enter runs it as it is. Ctrl-C cancels a running statement "
              "(or clears the line); Ctrl-D leaves.\n")
    out.print(table)
    out.print("\n\\help TOPIC prints that section of the language reference. "
              "Topics: " + ", ".join(docs_help.topics()), markup=False)


def describe(out: Console, spark, rest: str, at: int) -> None:
    """``\\d``: every table and view with its kind and registered times; ``\\d NAME``:
    that one's columns and its registration."""
    from rich.table import Table

    # here, not at the top: dfsql.api loads sqlglot and the planner (0.1 s), which
    # the prompt need not wait for
    from dfsql.api import registration

    if not rest:
        table = Table(box=display.box.SIMPLE_HEAVY, header_style="bold")
        for col in ("name", "database", "kind", "event time", "processing time"):
            table.add_column(col, no_wrap=True)
        for t in sorted(spark.catalog.listTables(), key=lambda t: t.name):
            reg = registration(t.name, spark)
            kind = "temp view" if t.isTemporary else (t.tableType or "").lower()
            if t.isTemporary and spark.table(t.name).isStreaming:
                kind = "streaming view"
            table.add_row(t.name, t.namespace[0] if t.namespace else "", kind,
                          (reg and reg.event_time) or "", (reg and reg.processing_time)
                          or "")
        out.print(table)
        return
    from pyspark.errors import PySparkException

    try:
        schema = spark.table(rest).schema
    except PySparkException:
        raise ShellError(f"no table or view named {rest}", 1, at + 1,
                         "\\d lists them") from None
    table = Table(box=display.box.SIMPLE_HEAVY, header_style="bold", title=rest)
    for col in ("column", "type", "nullable"):
        table.add_column(col, no_wrap=True)
    for f in schema.fields:
        table.add_row(f.name, f.dataType.simpleString(), "yes" if f.nullable else "no")
    out.print(table)
    reg = registration(rest, spark)
    if reg is not None:
        out.print(f"registered with event time {reg.event_time or '-'}, processing "
                  f"time {reg.processing_time or '-'}"
                  + (f", watermark {reg.watermark}" if reg.watermark else ""))


@dataclass(frozen=True)
class LoadCommand:
    """What a ``\\load`` command asks for, each word's column in the command's line
    kept to position an error about it."""

    name: str
    path: str
    path_at: int
    stream: bool = False
    event_time: str | None = None
    processing_time: str | None = None
    watermark: str | None = None
    #: EVENT, PROCESSING, WATERMARK -> where that clause's column or words start
    positions: dict[str, int] = field(default_factory=dict)

    def error_at(self, e: DfsqlError, at: int) -> ShellError:
        """``dfsql.register``'s error about one of the options, under that option."""
        which = ("EVENT" if "event_time=" in e.message else
                 "PROCESSING" if "processing_time=" in e.message else "WATERMARK")
        return ShellError(e.message, 1, self.positions.get(which, at) + 1, e.hint)


def parse_load(rest: str, at: int) -> LoadCommand:
    """``\\load NAME PATH [STREAM] [EVENT TIME col] [PROCESSING TIME col]
    [WATERMARK ...]``'s words (``rest`` starts ``at`` characters into the line)."""
    words = [(m.group(0).strip("'\""), at + m.start())
             for m in re.finditer(r"'[^']*'|\"[^\"]*\"|\S+", rest)]
    if len(words) < 2:
        raise ShellError("\\load needs a name and a path", 1, at + 1, LOAD_USAGE)
    (name, name_at), (path, path_at) = words[0], words[1]
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ShellError(f"{name!r} is not a table name", 1, name_at + 1,
                         "a letter or _ and then letters, digits or _")
    stream, watermark = False, None
    columns: dict[str, str] = {}
    positions: dict[str, int] = {}
    i = 2
    while i < len(words):
        word, word_at = words[i][0].upper(), words[i][1]
        pair = words[i + 1][0].upper() if i + 1 < len(words) else ""
        if word == "STREAM":
            stream, i = True, i + 1
        elif (word, pair) in (("EVENT", "TIME"), ("PROCESSING", "TIME")):
            if i + 2 >= len(words):
                raise ShellError(f"{word} TIME needs a column", 1, word_at + 1, LOAD_USAGE)
            columns[word], positions[word] = words[i + 2]
            i += 3
        elif word == "WATERMARK":
            watermark = rest[word_at - at + len("WATERMARK"):].strip()
            positions["WATERMARK"] = word_at
            break
        else:
            raise ShellError(f"unexpected {words[i][0]!r}", 1, word_at + 1, LOAD_USAGE)
    return LoadCommand(name, path, path_at, stream, columns.get("EVENT"),
                       columns.get("PROCESSING"), watermark, positions)


def file_format(load: LoadCommand) -> tuple[Path, str]:
    """The file or directory ``\\load`` reads and its one format (csv, json or
    parquet), checked before Spark is waited for."""
    path, path_at = load.path, load.path_at
    p = Path(path).expanduser()
    if not p.exists():
        raise ShellError(f"no file or directory {path}", 1, path_at + 1,
                         "give a CSV, JSON or Parquet file, or a directory of them")
    files = [p] if p.is_file() else sorted(f for f in p.iterdir() if f.is_file()
                                           and not f.name.startswith((".", "_")))
    kinds = {f.suffix.lower().lstrip(".") for f in files} & {"csv", "json", "jsonl",
                                                               "parquet"}
    if len(kinds) != 1:
        raise ShellError(f"{path}: expected .csv, .json or .parquet files, found "
                         f"{sorted({f.suffix for f in files}) or 'none'}", 1, path_at + 1,
                         "a directory must hold files of one format")
    fmt = kinds.pop().replace("jsonl", "json")
    if load.stream and p.is_file():
        raise ShellError("STREAM reads a directory (its files arriving over time)", 1,
                         path_at + 1, "give the directory the files arrive in")
    return p, fmt


def read_files(spark, p: Path, fmt: str, stream: bool) -> Any:
    """A CSV, JSON or Parquet file or directory as a DataFrame (a stream's schema is
    read from the files already there)."""
    if fmt == "parquet":  # pandas' nanosecond timestamps as timestamps
        with spark_errors(None):
            return read_parquet(p, spark, stream=stream)
    reader = spark.read.format(fmt)
    if fmt == "csv":
        reader = reader.option("header", True).option("inferSchema", True)
    df = reader.load(str(p))
    if not stream:
        return df
    reader = spark.readStream.format(fmt).schema(df.schema)
    if fmt == "csv":
        reader = reader.option("header", True)
    return reader.load(str(p))


def name_connection(out: Console, rest: str, at: int, ask_password) -> None:
    """``\\connection NAME URL``: a database named for the shell's statements
    (docs/guides/databases.md), its password asked for (``ask_password(name)``, None:
    libpq finds it); ``\\connection`` alone lists the connections, never a password."""
    words = rest.split()
    if not words:
        for name in CONNECTIONS.names():
            out.print(f"{name}: {CONNECTIONS.named(name).url}", highlight=False)
        if not CONNECTIONS.names():
            out.print("no connections yet: \\connection NAME postgresql://USER@HOST/DB")
        return
    if len(words) != 2:
        raise ShellError("\\connection takes a name and a URL", 1, at + 1,
                         "\\connection NAME postgresql://USER@HOST[:PORT]/DB (no "
                         "password in it: it is asked for)")
    name, url = words
    try:
        parse(name, url)  # checked before a password is asked for
    except DfsqlError as e:
        bad_name = e.message.endswith("is not a connection name")
        raise ShellError(e.message, 1, at + 1 + (0 if bad_name else rest.index(url)),
                         e.hint) from None
    conn = CONNECTIONS.add(name, url, ask_password(name))
    out.print(f"{conn.name}: {conn.url}", highlight=False)
