"""What one statement may cost the endpoint (issue #31, "no statement starves or kills
the server"): checks on a statement before any parser sees it, and the bound on how
much of a result the server holds at once.

* Size (``--max-statement-kb``) is counted over the raw text, before anything reads it.
  Parenthesis nesting (``--max-nesting``) is counted on the statement's tokens, from
  the one scan dfsql makes of it (:func:`dfsql.language.scan.scan_text`, which the
  operation then parses: the statement is not scanned again): Spark's ANTLR parser
  spends seconds to minutes on a few thousand nested parentheses (50,000 kept a JVM
  thread busy for minutes after the client left, and 512 overflow its stack), and no
  thread can interrupt it once it runs. These are resource bounds, not judgements of
  what a statement means (that is :mod:`dfsql.server.judge`'s): a parenthesis inside a
  string, a quoted name or a comment is not a token (a quote's escapes honoured, none
  in a raw string ``r'…'``, block comments nested: as Spark reads them), nothing else
  is looked at. A statement the scanner cannot read (an unterminated string or
  comment, unbalanced parentheses) reaches no parser at all: dfsql refuses it with the
  scanner's error when it runs.
* A result reaches the server one Spark partition at a time (``toLocalIteratorAndServe``
  collects each partition whole, in the JVM, before sending it on), so one huge
  partition — ``range(0, 2000000000, 1, 1)`` is 16 GB — ran the JVM out of memory and the
  server exited. :func:`bounded_partitions` makes a partition that grows past
  ``--max-partition-mb`` (estimated from the column types) fail its task with a clear
  error instead, before it is held; the other partitions, and the server, go on.
"""

from __future__ import annotations

import hashlib
import re
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError, DfsqlSyntaxError
from dfsql.language.scan import Scanned, scan_text

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: defaults of ``dfsql serve --max-statement-kb / --max-nesting / --max-fetch-rows /
#: --max-partition-mb``: a statement far larger than any written by hand (and well below
#: --max-message-mb's 64 MB frame), nesting below where Spark's parser overflows its
#: stack (512) and costs seconds, HiveServer2's own fetch cap
#: (``hive.server2.thrift.resultset.max.fetch.size``), and a partition that leaves room
#: for two per running statement (the one sent and the next, prefetched) in a 4 GB heap
MAX_STATEMENT_KB, MAX_NESTING, MAX_FETCH_ROWS, MAX_PARTITION_MB = 1024, 256, 10_000, 128
#: the default of ``dfsql serve --max-sessions-per-user``: a JDBC connection pool's worth
#: (HiveServer2 keeps no such limit, and a forgotten client piled up 150 for 8 hours).
#: Its sessions times their operations (4 each) is what one user may have running or
#: waiting at once: a user's first statement waits for no one's, the others for a
#: shared thread given to the user running fewest (:mod:`dfsql.server.fair`), and their
#: tasks share one FAIR pool (:func:`user_pool`)
MAX_SESSIONS_PER_USER = 20
#: the default of ``dfsql serve --max-streaming-queries-per-user``: each continuous query
#: holds threads, state and a view for as long as it runs (20 held 3 GB and 366 threads)
MAX_STREAMING_QUERIES_PER_USER = 10
#: SQLSTATE "program limit exceeded", what every refusal here carries
LIMIT_STATE = "54000"
#: in the message a too-large partition's task fails with: how its error is told apart
MARKER = "DFSQL_PARTITION_LIMIT"
#: the lower 33 bits of monotonically_increasing_id(): a row's index in its partition
_ROW_IN_PARTITION = (1 << 33) - 1



class LimitError(DfsqlError):
    """A statement over one of the endpoint's limits (SQLSTATE 54000)."""

    sqlstate = LIMIT_STATE


def check_statement(text: str, max_kb: float, max_nesting: int) -> Scanned | None:
    """Refuse a statement over ``max_kb`` kilobytes (UTF-8) before anything reads it,
    then one nested deeper than ``max_nesting`` parentheses before anything parses it
    (0: no limit). Returns the statement scanned, for the operation to parse (None: it
    does not scan, and the operation's parse raises the scanner's error)."""
    if max_kb > 0:
        size, limit = len(text.encode("utf-8", "surrogatepass")), int(max_kb * 1024)
        if size > limit:
            raise LimitError(
                f"the statement is {size:,} bytes long; the limit is {max_kb:g} kB, "
                f"{limit:,} bytes (dfsql serve --max-statement-kb)",
                hint="load large data from a file or a table rather than the statement's "
                     "text, or split the statement")
    try:
        scanned = scan_text(text)
    except DfsqlSyntaxError:
        return None
    if max_nesting > 0:
        depth, line, column = nesting(scanned, max_nesting)
        if depth > max_nesting:
            raise LimitError(
                f"parentheses nested more than {max_nesting} deep; the limit is "
                f"{max_nesting} (dfsql serve --max-nesting)", line, column,
                "flatten the expression or the subqueries (a CTE, WITH name AS (...), "
                "names a subquery once)")
    return scanned


def nesting(scanned: Scanned, limit: int) -> tuple[int, int | None, int | None]:
    """The deepest parenthesis nesting of the scanned statement (its ``(`` tokens: none
    in a string, a quoted name or a comment), up to the first past ``limit`` (returned
    with its line and column: the count stops there)."""
    deepest = 0
    for tok in scanned.tokens:
        if tok.kind == "punct" and tok.text == "(" and tok.depth >= deepest:
            deepest = tok.depth + 1  # a "(" carries the depth it opens from
            if deepest > limit:
                at = scanned.source.pos(tok.start)
                return deepest, at.line, at.column
    return deepest, None, None


# --------------------------------------------------------------------------- results


def row_width(df: DataFrame) -> int:
    """Bytes a row of ``df`` takes, estimated from its column types (Spark's default
    sizes: 8 for a bigint, 20 for a string), plus a validity byte and an offset per
    column for Arrow's buffers."""
    try:
        width = int(df._jdf.schema().defaultSize())
    except Exception:  # noqa: BLE001 (no JVM: Spark Connect)
        width = 8 * len(df.schema.fields)
    return max(1, width + 5 * len(df.schema.fields))


def bounded_partitions(df: DataFrame, max_mb: float) -> DataFrame:
    """``df`` whose every partition fails its task, with :data:`MARKER`'s error, at the
    first row past ``max_mb`` megabytes (estimated by :func:`row_width`), before the
    JVM has gathered more than that of it; 0: no bound. A filter on top of the plan,
    never pushed below it (its condition is not deterministic), so rows, their order
    and the plan under it stay as they were."""
    if max_mb <= 0:
        return df
    from pyspark.sql import functions as F  # noqa: N812

    rows = max(1, int(max_mb * 2**20) // row_width(df))
    index = F.monotonically_increasing_id().bitwiseAND(F.lit(_ROW_IN_PARTITION))
    too_many = F.raise_error(F.lit(f"{MARKER}:{rows}:{max_mb:g}"))
    return df.where(F.when(index >= rows, too_many).otherwise(F.lit(True)))


_PARTITION_ERROR = re.compile(MARKER + r":(\d+):([\d.e+]+)")


def partition_refusal(text: str) -> tuple[str, str] | None:
    """(message, SQLSTATE) when ``text`` (a failed job's error) is a partition over
    --max-partition-mb, else None."""
    m = _PARTITION_ERROR.search(text)
    if m is None:
        return None
    rows, mb = m.groups()
    return (f"a partition of the result holds more than {int(rows):,} rows (about {mb} MB, "
            "dfsql serve --max-partition-mb): the server would have to hold it whole to "
            "send it\n  hint: add a LIMIT, or spread the rows over more partitions "
            "(SELECT /*+ REPARTITION(n) */ ...), which are sent one at a time",
            LIMIT_STATE)


# --------------------------------------------------------------------------- scheduling


def fair_scheduling(spark) -> bool:
    """Whether the SparkContext schedules FAIR (``spark.scheduler.mode``, fixed when it
    started): without it the per-session pools are ignored and jobs run first come,
    first served. Unknown (Spark Connect: the server's business) counts as yes."""
    try:
        mode = spark.sparkContext.getConf().get("spark.scheduler.mode", "FIFO")
    except Exception:  # noqa: BLE001
        return True
    return mode.upper() == "FAIR"


def user_pool(user: str) -> str:
    """The FAIR scheduler pool of ``user``'s statements: one per user, whatever the
    number of their sessions (a digest: a user name is the client's text)."""
    return "dfsql-" + hashlib.sha256(user.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def drop_pool(spark, name: str) -> None:
    """Forget a scheduler pool no session uses any more (its user's last session
    closed): Spark keeps every pool it was ever given, and walks (and sorts) all of
    them on each free task slot."""
    try:
        root = spark.sparkContext._jsc.sc().taskScheduler().rootPool()
        pool = root.getSchedulableByName(name)
        if pool is not None:
            root.removeSchedulable(pool)
    except Exception:  # noqa: BLE001 (Spark Connect, or Spark's internals moved)
        pass
