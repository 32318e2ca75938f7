"""User-facing errors.

Every mistake a user can make in a query surfaces as a :class:`DfsqlError` that names the
line and column in the query text and, where useful, a hint — never a Python or Java
stack trace. Subclasses say which kind of mistake it was so that callers (the Thrift
endpoint, the REPL) can map them to SQLSTATEs.
"""

from __future__ import annotations


class DfsqlError(Exception):
    """A user mistake in a dfsql query (or a condition the user must act on)."""

    sqlstate = "42000"

    def __init__(
        self,
        message: str,
        line: int | None = None,
        column: int | None = None,
        hint: str | None = None,
    ) -> None:
        self.message = message
        self.line = line
        self.column = column
        self.hint = hint
        super().__init__(self.__str__())

    def __str__(self) -> str:
        where = f"line {self.line}, col {self.column}: " if self.line is not None else ""
        text = f"{where}{self.message}"
        if self.hint:
            text += f"\n  hint: {self.hint}"
        return text

    # Exceptions are pickled when they cross Spark/worker boundaries; keep all fields.
    def __reduce__(self):  # type: ignore[override]
        return (type(self), (self.message, self.line, self.column, self.hint))


class DfsqlSyntaxError(DfsqlError):
    """The text does not follow the grammar (unexpected token, unbalanced parentheses)."""


class UnknownKeywordError(DfsqlSyntaxError):
    """A word where a dfsql keyword was expected; carries a did-you-mean hint."""


class ClauseOrderError(DfsqlSyntaxError):
    """An extension clause is repeated or out of the order of docs/reference.md#query-shape."""


class MissingOperandError(DfsqlSyntaxError):
    """UNTIL / FINALLY / THEN (or another operator) without its right-hand trigger."""


class DurationError(DfsqlError):
    """A duration that is zero, negative, or has an unknown unit."""


class TriggerError(DfsqlError):
    """A trigger that is well formed but meaningless (e.g. a repeating FINALLY branch)."""


class WindowedQueryError(DfsqlError):
    """A windowed query whose SELECT cannot be windowed (e.g. it does not aggregate)."""


class WatermarkError(DfsqlError):
    """A WATERMARK clause that cannot be honoured (e.g. PERFECT without PROCESSING TIME)."""


class SourceError(DfsqlError):
    """A source that does not fit the clause (PROCESSING TIME on a stream, bad table shape)."""


class AnalysisError(DfsqlError):
    """Spark rejected the query (unknown table or column, type mismatch), mapped to our text."""

    sqlstate = "42S02"


class DataError(DfsqlError):
    """The data breaks a rule of the query (e.g. NULL in the PROCESSING TIME column)."""

    sqlstate = "22000"


class NotSupportedError(DfsqlError):
    """A well-formed query that this version of dfsql cannot execute yet."""

    sqlstate = "0A000"


class DatabaseError(DfsqlError):
    """A database connection that is not named, malformed, or that the database refuses
    (a login, a missing privilege, a server that is down when a query is created)."""

    sqlstate = "08001"


class ClusterUnreachableError(DfsqlError):
    """The Spark cluster or Spark Connect server named in the configuration does not answer."""

    sqlstate = "08001"
