"""Spark's exceptions, mapped to :class:`DfsqlError` at positions in the user's text.

Spark reports analysis and parse errors against the SQL text it was given. dfsql gives
Spark either the user's text itself (plain SQL) or a stage whose offsets are those of the
user's text shifted by a known amount, so a Spark position maps straight back.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from dfsql.errors import AnalysisError, DataError, DfsqlError, DfsqlSyntaxError
from dfsql.language.scan import Source

_LINE_POS = re.compile(r"line (\d+), pos (\d+)")
#: what to do about Parquet with nanosecond timestamps (pandas writes them; Spark holds µs)
NANOS_HINT = ("the file has nanosecond timestamps (pandas writes them): read it with "
              "dfsql.read_parquet(path) or \\load in the shell (as timestamps, to the microsecond), "
              "or write it with to_parquet(..., coerce_timestamps='us')")


def _first_line(message: str) -> str:
    msg = message.strip().split("\n")[0]
    return re.sub(r"\s*SQLSTATE: \w+.*$", "", msg)


#: a backquoted, possibly qualified name in Spark's message (`t`.`c`)
_NAME = re.compile(r"`[^`]*`(?:\.`[^`]*`)*")
#: Spark's suggestions (``Did you mean one of the following? [...]``)
_SUGGESTIONS = re.compile(r"\s*Did you mean one of the following\? \[([^\]]*)\]\.?")
#: what a name dfsql generated (``__dfsql_in_0``, ``__k0``, ``__event_time``) is called
GENERATED = "a column dfsql generated"


def _as_written(name: str) -> str | None:
    """A backquoted name as the user could have written it: unchanged, without a
    qualifier dfsql generated (a stage's view ``__dfsql_…``), or None when the name
    itself is dfsql's (every generated name starts with ``__``)."""
    parts = re.findall(r"`([^`]*)`", name)
    if not parts or parts[-1].startswith("__"):
        return None
    if any(p.startswith("__") for p in parts):
        return f"`{parts[-1]}`"
    return name


def _user_facing(message: str) -> tuple[str, str | None]:
    """The message without dfsql's generated names, and a hint with those of Spark's
    suggestions the user could have written (None when none is left): an error on a
    generated stage must not show names the user never wrote (``__dfsql_in_11``.``__k0``)."""
    hint = None
    m = _SUGGESTIONS.search(message)
    if m:
        names = [n.strip() for n in m.group(1).split(",") if n.strip()]
        kept = [k for k in map(_as_written, names) if k is not None]
        if kept:
            hint = f"did you mean one of {', '.join(kept)}?"
        if kept != names:
            said = f" Did you mean one of the following? [{', '.join(kept)}]." if kept else ""
            message = message[:m.start()] + said + message[m.end():]
    message = _NAME.sub(lambda mm: _as_written(mm.group(0)) or GENERATED, message)
    return message.strip(), hint


def quiet_spark_loggers() -> None:
    """PySpark logs every analysis error with its Java stack trace before raising it; dfsql
    turns those errors into DfsqlErrors, so the log would only show users a stack trace."""
    import logging

    for name in ("SQLQueryContextLogger", "DataFrameQueryContextLogger"):
        logging.getLogger(name).setLevel(logging.CRITICAL + 1)


def map_spark_error(exc: BaseException, src: Source | None, offset_of: Callable[[int], int]
                    | None = None, text: str | None = None) -> DfsqlError | None:
    """A DfsqlError for a Spark exception, or None when it is not a user mistake."""
    try:
        from pyspark.errors import (
            AnalysisException,
            ParseException,
            PySparkException,
        )
    except ImportError:  # pragma: no cover
        return None
    if not isinstance(exc, PySparkException):
        return None
    message = _first_line(str(exc))
    cls: type[DfsqlError] = AnalysisError
    if isinstance(exc, ParseException):
        cls = DfsqlSyntaxError
    elif not isinstance(exc, AnalysisException):
        cond = ""
        try:
            cond = exc.getCondition() or ""  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - older/newer PySpark differ here
            cond = ""
        try:
            state = exc.getSqlState() or ""  # type: ignore[attr-defined]
        except Exception:  # noqa: BLE001 - older/newer PySpark differ here
            state = ""
        # SQLSTATE class 22 is a data exception (e.g. a literal beyond DECIMAL(38))
        if cond.startswith(("CAST_", "DIVIDE_BY_ZERO", "ARITHMETIC", "NUMERIC", "INVALID_")) \
                or state.startswith("22"):
            cls = DataError
        else:
            return None
    line = col = None
    start = None
    try:
        contexts = exc.getQueryContext()  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001
        contexts = []
    for ctx in contexts or []:
        try:
            start = ctx.startIndex()
        except Exception:  # noqa: BLE001
            start = None
        if start is not None and start >= 0:
            break
    if start is None or start < 0:
        m = _LINE_POS.search(str(exc))
        if m and text is not None:
            ln, pos = int(m.group(1)), int(m.group(2))
            lines = text.split("\n")
            start = sum(len(x) + 1 for x in lines[: ln - 1]) + pos
    if (start is None or start < 0) and offset_of is not None:
        start = 0  # no position from Spark: the start of the fragment it was given
    if start is not None and start >= 0 and src is not None:
        p = src.pos(offset_of(start) if offset_of else start)
        line, col = p.line, p.column
    elif src is not None:
        line, col = 1, 1
    message, hint = _user_facing(message)
    if hint is None and isinstance(exc, ParseException):
        hint = _misspelt_keyword(exc)
    if hint is None and "TABLE_OR_VIEW_NOT_FOUND" in str(exc):
        hint = "register it with dfsql.register(name, df) or CREATE TEMP VIEW"
    elif "PARQUET_TYPE_ILLEGAL" in str(exc) and "TIMESTAMP(NANOS" in str(exc):
        hint = NANOS_HINT
    mapped = cls(message, line, col, hint)
    state = _java_call(exc, "getSqlState")
    if state:  # Spark's own (42703 for an unknown column), not the class's default
        mapped.sqlstate = state
    return mapped


#: the words a Spark SQL statement starts with
STATEMENT_WORDS = (
    "SELECT", "WITH", "FROM", "VALUES", "TABLE", "INSERT", "CREATE", "DROP", "ALTER",
    "SHOW", "DESCRIBE", "EXPLAIN", "SET", "RESET", "USE", "CACHE", "UNCACHE", "REFRESH",
    "MERGE", "UPDATE", "DELETE", "TRUNCATE", "ANALYZE", "LOAD", "DECLARE", "EXECUTE",
    "REPLACE", "COMMENT")


def _misspelt_keyword(exc: BaseException) -> str | None:
    """``did you mean SELECT?`` when Spark's syntax error stands at a word that is no
    statement's first word but is spelt close to one (``SELCT 1``)."""
    import difflib

    try:
        near = (exc.getMessageParameters() or {}).get("error", "")  # type: ignore[attr-defined]
    except Exception:  # noqa: BLE001 - older/newer PySpark differ here
        return None
    word = near.strip("'\"").upper()
    if not word.isalpha() or word in STATEMENT_WORDS:
        return None
    close = difflib.get_close_matches(word, STATEMENT_WORDS, n=1, cutoff=0.75)
    return f"did you mean {close[0]}?" if close else None


def _java_call(obj, method: str):
    """``obj.method()``, or None where it has no such method or the call fails (py4j
    answers a method the Java class lacks with an error, not an AttributeError)."""
    try:
        return getattr(obj, method)()
    except Exception:  # noqa: BLE001
        return None


#: how far down a Java exception's causes its error is looked for
MAX_CAUSES = 12


def java_error(exc: BaseException) -> tuple[str, str] | None:
    """(message, SQLSTATE) of a Java exception PySpark left as py4j's ``Py4JJavaError``
    (one it does not convert: ``org.apache.spark.SparkException`` among them), whose
    text starts "An error occurred while calling o73.getResult" and goes on with the
    Java stack. Spark's own words instead: the first exception down the causes that has
    an error class (a job's ``[FAILED_READ_FILE.NO_HINT] ...`` under "Exception thrown
    in awaitResult"), its message's first line with the class and SQLSTATE; else the
    innermost cause's class and first line. None when ``exc`` is no such error."""
    java = getattr(exc, "java_exception", None)
    if java is None:
        return None
    chain = []
    while java is not None and len(chain) < MAX_CAUSES:
        chain.append(java)
        java = _java_call(java, "getCause")
    for t in chain:
        condition = _java_call(t, "getCondition") or _java_call(t, "getErrorClass")
        if condition:
            text = (str(_java_call(t, "getMessage") or "").strip().splitlines() or [""])[0]
            if not text.startswith("["):
                text = f"[{condition}] {text}"
            return text.strip(), _java_call(t, "getSqlState") or "HY000"
    for t in reversed(chain):
        text = str(_java_call(t, "getMessage") or "").strip()
        if text:
            name = str(_java_call(_java_call(t, "getClass"), "getName") or "")
            return f"{name}: {text.splitlines()[0]}".lstrip(": "), "HY000"
    return str(_java_call(chain[0], "toString") or type(exc).__name__), "HY000"


@contextmanager
def spark_errors(src: Source | None, offset_of: Callable[[int], int] | None = None,
                 text: str | None = None,
                 mapper: Callable[[BaseException], DfsqlError | None] | None = None
                 ) -> Iterator[None]:
    """Turn Spark exceptions raised inside the block into DfsqlErrors (Python → no trace).
    ``mapper``: one that places the error itself (a generated stage's, on the user's
    text) instead of :func:`map_spark_error` at ``src``; None from it re-raises."""
    quiet_spark_loggers()
    try:
        yield
    except DfsqlError:
        raise
    except Exception as exc:  # noqa: BLE001 - decide below whether it is the user's mistake
        mapped = (map_spark_error(exc, src, offset_of, text) if mapper is None
                  else mapper(exc))
        if mapped is None:
            raise
        raise mapped from None
