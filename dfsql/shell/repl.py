"""The dfsql shell: statements and backslash commands, typed or read from a script.

Spark starts in the background as the shell opens, so the prompt is there at once; the
first statement waits for it. The JVM's own chatter (log4j's start-up lines, warnings)
goes to a log file instead of the terminal (:data:`dfsql.session.SPARK_LOG`), where it would break
into the prompt; dfsql's messages and Spark's errors still reach the user as
DfsqlErrors. A statement ends at ``;``; Enter before that continues the statement on a
new line (Esc Enter runs it anyway).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dfsql import api
from dfsql.errors import DfsqlError
from dfsql.language.scan import Source
from dfsql.result_warnings import batch_notes, dropped_warnings
from dfsql.session import DEFAULT_MASTER, register_paper_tables, session
from dfsql.shell import display
from dfsql.shell.commands import (
    ShellError,
    describe,
    file_format,
    name_connection,
    parse_load,
    read_files,
    show_help,
)
from dfsql.shell.jobs import Cancelled, Job
from dfsql.shell.lexer import COMMANDS, Catalog, DfsqlLexer, ShellCompleter
from dfsql.shell.plot import is_firings, plot_result
from dfsql.shell.plot_tradeoff import TradeoffSummary, is_tradeoff
from dfsql.shell.script import Piece, is_complete, split
from dfsql.shell.watch import watch
from dfsql.spark import progress_bar
from dfsql.spark.errors import spark_errors
from dfsql.spark.planned import Planned
from dfsql.version import __version__

DEFAULT_HISTORY = Path.home() / ".dfsql_history"
DEFAULT_PLOT = "dfsql-plot.png"


@dataclass
class LastResult:
    """The last windowed (or EXPLAIN WATERMARK) result shown, for ``\\plot``."""

    text: str
    #: the statement's plan value (:func:`dfsql.api.plan`): its top block is what is drawn
    planned: Planned
    columns: list[str]
    rows: list[tuple]


class Quit(Exception):
    """``\\q``: leave the shell (or end a script there, successfully)."""


class Shell:
    """One shell: its Spark session, settings and the last windowed result."""

    def __init__(self, master: str | None = None, paper_tables: bool = False,
                 history: str | None = None, quiet_spark: bool = True) -> None:
        self.master = master
        self.paper_tables = paper_tables
        self.history = Path(history or os.environ.get("DFSQL_HISTORY") or DEFAULT_HISTORY)
        self.quiet_spark = quiet_spark
        progress_bar.disable()  # the shell draws its own bars (dfsql.shell.jobs)
        self.out = display.make_console()
        self.err = display.make_console(stderr=True)
        self.timing = True
        self.max_rows = 1000
        self.pager = True
        self.last: LastResult | None = None
        self._spark: Any = None
        self._spark_error: BaseException | None = None
        self._starting: threading.Thread | None = None
        # set when the start ends; not Thread.is_alive(), which a Ctrl-C inside
        # Thread.join can leave saying False (CPython before 3.13)
        self._started = threading.Event()
        self._watches = 0
        self.catalog = Catalog(lambda: self._spark)

    # ------------------------------------------------------------------ Spark
    def start_spark(self) -> None:
        """Start Spark in the background (the interactive shell does, at once)."""
        if self._spark is None and self._starting is None:
            self._starting = threading.Thread(target=self._create_spark, daemon=True,
                                              name="dfsql-shell-spark")
            self._starting.start()

    def _create_spark(self) -> None:
        try:
            if not self.quiet_spark:
                os.environ["DFSQL_SPARK_LOG"] = "-"  # the JVM's output on the terminal
            spark = session(self.master)
            if self.paper_tables:
                register_paper_tables(spark)
            self._spark = spark
        except BaseException as e:  # noqa: BLE001 - reported when a statement needs Spark
            self._spark_error = e
        finally:
            self._started.set()

    def spark(self):
        """The session, waiting for it to start (and starting it if nobody did)."""
        if self._spark is not None:
            return self._spark
        self.start_spark()
        assert self._starting is not None
        if not self._started.is_set():
            with self.out.status("starting Spark ...", spinner="dots"):
                self._started.wait()
        if self._spark is None:
            error, self._spark_error, self._starting = self._spark_error, None, None
            self._started.clear()
            raise error if error is not None else DfsqlError("Spark did not start")
        return self._spark

    # ------------------------------------------------------------------ running
    def run_piece(self, piece: Piece, where: str = "") -> bool:
        """Run one statement or command; print its result or its error. True if it
        succeeded. ``where`` names a script (errors then give the script's lines)."""
        offset = piece.line - 1 if where else 0
        try:
            if piece.is_command:
                self.command(piece.text)
            else:
                self.statement(piece.text)
            return True
        except Quit:
            raise
        except Cancelled:
            self.err.print("cancelled (its Spark jobs were stopped)", style="yellow")
        except DfsqlError as e:
            display.print_error(self.err, e, piece.text, where, offset)
        except Exception as e:  # noqa: BLE001 - a shell carries on after any failure
            display.print_error(self.err, _unexpected(e), None, where)
            if os.environ.get("DFSQL_DEBUG"):
                import traceback

                traceback.print_exc()
        return False

    def run_script(self, text: str, where: str = "") -> int:
        """Every statement and command of ``text`` in order; stop at the first error
        (exit status 1), so nothing after a failed statement runs. ``\\q`` raises
        :class:`Quit`: the caller ends there."""
        for piece in split(text):
            if not self.run_piece(piece, where):
                return 1
        return 0

    def statement(self, text: str) -> None:
        """A SQL statement (dfsql's extended SQL, or plain Spark SQL): run it and show
        its rows."""
        text = text.strip().rstrip(";").rstrip()
        parsed = _check_syntax(text)  # at once, even while Spark is still starting
        spark = self.spark()
        t0 = time.monotonic()

        def work():
            planned = api.plan(parsed, spark)  # the statement parsed: not read again
            df = planned.result
            if df.isStreaming:
                return planned, None, False, []
            got: list = []
            with spark_errors(Source(text), text=text):
                if df.columns:
                    got = df.limit(self.max_rows + 1).collect()
                # after the rows: the replay counted its drops while they were computed
                warnings = dropped_warnings(planned)
            return planned, [tuple(r) for r in got[: self.max_rows]], \
                len(got) > self.max_rows, warnings

        try:
            planned, rows, more, warnings = self._job(spark, work, text)
        finally:
            self.catalog.invalidate()  # the statement may have made or dropped a view
        if rows is None:
            raise DfsqlError("this query reads a stream: it has no end to wait for", 1, 1,
                             "\\watch it to see its panes live, or start it with CREATE "
                             "STREAMING QUERY name AS ...")
        df = planned.result
        columns = list(df.columns)
        if ("emit_time" in columns or is_firings(columns)) and "window_start" in columns or \
                is_tradeoff(columns):
            self.last = LastResult(text, planned, columns, rows)
        display.print_result(self.out, columns, rows, more,
                             time.monotonic() - t0 if self.timing else None,
                             page=self.pager and sys.stdin.isatty(), warnings=warnings,
                             changelog=planned.is_changelog)
        for note in batch_notes(planned):
            self.err.print(note, style="yellow")

    def _job(self, spark, fn, text: str):
        console = self.err if self.err.is_terminal else None
        return Job(spark, fn, text).run(progress_console=console)

    # ------------------------------------------------------------------ commands
    def command(self, text: str) -> None:
        name, _, rest = text.partition(" ")
        name = name.lower()
        rest_at = len(name) + 1 + (len(rest) - len(rest.lstrip()))
        rest = rest.strip()
        handler = {
            "\\d": self._describe, "\\load": self._load, "\\explain": self._explain,
            "\\watch": self._watch, "\\plot": self._plot, "\\timing": self._timing,
            "\\maxrows": self._maxrows, "\\pager": self._pager, "\\help": self._help,
            "\\?": self._help, "\\q": self._quit, "\\quit": self._quit,
            "\\connection": self._connection,
        }.get(name)
        if handler is None:
            import difflib

            close = difflib.get_close_matches(name, list(COMMANDS), n=1)
            raise ShellError(f"unknown command {name}", 1, 1,
                             f"did you mean {close[0]}? " if close else
                             "\\help lists the commands")
        handler(rest, rest_at)

    def _connection(self, rest: str, at: int) -> None:
        name_connection(self.out, rest, at, _ask_password)

    def _help(self, rest: str, at: int) -> None:
        show_help(self.out, rest, at)

    def _quit(self, _rest: str, _at: int) -> None:
        raise Quit

    def _timing(self, rest: str, at: int) -> None:
        self.timing = _on_off(rest, at, not self.timing)
        self.out.print(f"timing is {'on' if self.timing else 'off'}")

    def _pager(self, rest: str, at: int) -> None:
        self.pager = _on_off(rest, at, not self.pager)
        self.out.print(f"pager is {'on' if self.pager else 'off'}")

    def _maxrows(self, rest: str, at: int) -> None:
        if not rest.isdigit() or int(rest) < 1:
            raise ShellError(f"\\maxrows takes a whole number of rows, not {rest!r}", 1,
                             at + 1, "e.g. \\maxrows 5000")
        self.max_rows = int(rest)
        self.out.print(f"at most {self.max_rows} rows are fetched and shown")

    def _describe(self, rest: str, at: int) -> None:
        describe(self.out, self.spark(), rest, at)

    def _load(self, rest: str, at: int) -> None:
        """``\\load NAME PATH [STREAM] [EVENT TIME col] [PROCESSING TIME col]
        [WATERMARK ...]``: the files as a view, registered with those times."""
        load = parse_load(rest, at)
        path, fmt = file_format(load)
        df = read_files(self.spark(), path, fmt, load.stream)
        try:
            api.register(load.name, df, event_time=load.event_time,
                           processing_time=load.processing_time, watermark=load.watermark)
        except DfsqlError as e:
            raise load.error_at(e, at) from None
        finally:
            self.catalog.invalidate()
        self.out.print(f"{load.name}: {'streaming ' if load.stream else ''}view of {load.path} "
                       f"({', '.join(f'{f.name} {f.dataType.simpleString()}' for f in df.schema)})")

    def _explain(self, rest: str, at: int) -> None:
        text = rest.rstrip(";").rstrip()
        if not text:
            raise ShellError("\\explain needs a query", 1, at + 1, "\\explain SELECT ...")
        if text.split(None, 1)[0].lower() == "firings":
            name = _running_query_name(text)
            if name is not None:  # \explain firings q [WHERE …]: a running query's now
                self._explain_running(text, at, name)
                return
            # EXPLAIN FIRINGS as a statement, its words where the user typed them (so an
            # error's column is the line's); its result is the last one, for \plot
            self.statement("EXPLAIN" + " " * (at - len("EXPLAIN")) + text)
            return
        # not at the top, as in _check_syntax (sqlglot)
        from dfsql.language import parse_statement

        try:
            stmt = parse_statement(text)
            plan = api.explain(stmt, self._spark)  # the statement parsed: not read again
        except DfsqlError as e:
            raise _shifted(e, at) from None
        self.out.print(plan, highlight=False, markup=False)
        if not stmt.windowed:
            spark = self.spark()
            rows = self._job(spark, lambda: api.sql(f"EXPLAIN {text}", spark).collect(),
                             text)
            self.out.print(rows[0][0], highlight=False, markup=False)

    def _explain_running(self, text: str, at: int, name_at: int) -> None:
        """EXPLAIN FIRINGS FOR STREAMING QUERY, the words the user typed where they typed
        them (``text`` starts ``at`` characters into the line, the query's name
        ``name_at`` into ``text``): an error's column is moved back past the words put
        before the name."""
        put = "FOR STREAMING QUERY "
        start = at + name_at
        try:
            self.statement("EXPLAIN" + " " * (at - len("EXPLAIN")) + text[:name_at] + put
                           + text[name_at:])
        except DfsqlError as e:
            if e.line == 1 and e.column is not None and e.column > start:
                raise type(e)(e.message, 1, max(e.column - len(put), start + 1),
                              e.hint) from None
            raise

    def _plot(self, rest: str, at: int) -> None:
        if self.last is None:
            raise ShellError("\\plot draws the last windowed result, and there is none yet",
                             1, 1, "run a query with WINDOW first")
        path = rest or DEFAULT_PLOT
        if not path.lower().endswith(".png"):
            raise ShellError(f"\\plot writes a PNG file, not {path!r}", 1, at + 1,
                             "e.g. \\plot panes.png")
        spark = self.spark()
        summary = self._job(spark, lambda: plot_result(
            self.last.columns, self.last.rows, path, self.last.text,
            plan=self.last.planned.top_block), "\\plot")
        if isinstance(summary, TradeoffSummary):
            self.out.print(f"wrote {path}: {len(summary.points)} watermarks, the late "
                           "fraction against the ON_TIME latency of each")
            return
        self.out.print(f"wrote {path}: {len(summary.panes)} panes, "
                       f"{len(summary.retractions)} retractions"
                       + (f", {summary.elements} input elements" if summary.elements else "")
                       + (", the watermark" if summary.watermark_points else ""))
        for note in summary.notes:
            self.err.print(f"note: {note}", style="yellow")

    def _watch(self, rest: str, at: int) -> None:
        text = rest.rstrip(";").rstrip()
        if not text:
            raise ShellError("\\watch needs a windowed query over a stream", 1, at + 1,
                             "\\watch SELECT ... FROM a_stream ... WINDOW ...")
        self._watches += 1
        try:
            watch(self.spark(), self.out, text, f"__dfsql_watch_{self._watches}")
        except DfsqlError as e:
            raise _shifted(e, at) from None

    # ------------------------------------------------------------------ interactive
    def interactive(self) -> int:
        """The read-eval-print loop on a terminal."""
        from prompt_toolkit import PromptSession
        from prompt_toolkit.completion import ThreadedCompleter
        from prompt_toolkit.history import FileHistory
        from prompt_toolkit.key_binding import KeyBindings
        from prompt_toolkit.lexers import PygmentsLexer

        self.start_spark()
        keys = KeyBindings()

        @keys.add("enter")
        def _enter(event) -> None:
            buf = event.current_buffer
            state = buf.complete_state
            if state is not None and state.current_completion is not None:
                buf.apply_completion(state.current_completion)
            elif is_complete(buf.text):
                buf.validate_and_handle()
            else:
                buf.insert_text("\n")

        @keys.add("escape", "enter")
        def _run_anyway(event) -> None:
            event.current_buffer.validate_and_handle()

        self.history.parent.mkdir(parents=True, exist_ok=True)
        session: PromptSession = PromptSession(
            history=FileHistory(str(self.history)), lexer=PygmentsLexer(DfsqlLexer),
            completer=ThreadedCompleter(ShellCompleter(self.catalog)), multiline=True,
            key_bindings=keys, prompt_continuation=lambda width, _n, _s: "...> ".rjust(width),
            complete_while_typing=False)
        self.out.print(f"dfsql {__version__} shell on "
                       f"{self.master or _default_target()}. End statements with ';', "
                       f"\\help for help, Ctrl-D to leave.", style="dim")
        while True:
            try:
                text = session.prompt("dfsql> ")
            except KeyboardInterrupt:
                continue  # the line is cleared
            except EOFError:
                break
            try:
                for piece in split(text):
                    self.run_piece(piece)
            except Quit:
                break
        return 0


def _check_syntax(text: str):
    """``text`` parsed as dfsql.sql parses it (which takes the parsed statement)."""
    # here, not at the top: the SELECT's parser (sqlglot, 0.1-0.3 s) loads with the first
    # statement, not before the prompt
    from dfsql.language import parse_any

    return parse_any(text)


def _on_off(rest: str, at: int, toggled: bool) -> bool:
    word = rest.lower()
    if word in ("", "toggle"):
        return toggled
    if word in ("on", "off"):
        return word == "on"
    raise ShellError(f"expected on or off, not {rest!r}", 1, at + 1, None)


#: words a query starts with (``\explain firings <query>``, not a running query's name)
_QUERY_STARTS = {"select", "with", "from", "values", "table", "for"}


def _running_query_name(text: str) -> int | None:
    """``firings q [WHERE …]``: where the running query's name ``q`` starts in ``text``
    (None: ``firings <query>``)."""
    import re

    found = re.match(r"firings\s+([A-Za-z_]\w*|`[^`]+`)\s*(?:$|(?i:where)\b)", text,
                     re.IGNORECASE)
    if found is None or found.group(1).lower() in _QUERY_STARTS:
        return None
    return found.start(1)


def _shifted(e: DfsqlError, at: int) -> DfsqlError:
    """An error in a command's query, positioned in the command's line (the query
    starts ``at`` characters in)."""
    if e.line == 1 and e.column is not None:
        return type(e)(e.message, 1, e.column + at, e.hint)
    return e


def _unexpected(e: BaseException) -> DfsqlError:
    """Anything else that failed, as one line (Spark's message, or the Python error),
    never a stack trace; DFSQL_DEBUG=1 prints the trace too."""
    message = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    return DfsqlError(message[:500], hint=None if "Exception" in type(e).__name__ else
                      f"{type(e).__name__}; DFSQL_DEBUG=1 shows where it came from")


def _default_target() -> str:
    return os.environ.get("DFSQL_SPARK_REMOTE") or os.environ.get("DFSQL_SPARK_MASTER") \
        or DEFAULT_MASTER


def _ask_password(name: str) -> str | None:
    """A connection's password, typed at a terminal without echo (empty, or no terminal:
    None, and libpq finds it: PGPASSWORD, ~/.pgpass)."""
    if not sys.stdin.isatty():
        return None
    import getpass

    return getpass.getpass(f"password for {name} (empty: PGPASSWORD or ~/.pgpass): ") or None
