"""Statements from the endpoint's clients may not reach into the JVM or load code
(``dfsql serve --allow-jvm-functions`` lifts the rule): a client that can call
``java.lang.System.exit`` through ``reflect`` ends the server for everyone.

Refused before Spark sees the statement, each as a positioned error with SQLSTATE 42501:

* a call of ``reflect``, ``java_method`` or ``try_reflect`` anywhere in the text (any
  case, qualified or back-quoted, in a subquery, a CTE, a view's body, a windowed query,
  an ``EXECUTE IMMEDIATE`` string or behind ``IDENTIFIER('reflect')``);
* ``ADD JAR|FILE|ARCHIVE`` (and the plurals) of a path outside the data roots (read as
  Spark reads that command: its raw text, quoted or not);
* ``CREATE FUNCTION … USING JAR|FILE|ARCHIVE``, and ``CREATE FUNCTION name AS 'class'``
  (a JVM class by name: Hive's ``GenericUDFReflect`` is ``reflect`` under another name);
* a script transform, ``SELECT TRANSFORM(…) USING 'program'``: a process on the server.

The scanner (:mod:`dfsql.language.scan`) finds calls as a name followed by ``(``, so a
string ``'reflect('`` or a column ``reflect_x`` is not one. A statement that builds its
text at run time (``EXECUTE IMMEDIATE`` of a variable) cannot be read here: for that,
each client session's function registry also lacks the three functions
(:func:`drop_jvm_functions`), and Spark's "cannot resolve" becomes the same refusal
(:func:`refusal_of`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError
from dfsql.language.scan import Source, Token, scan
from dfsql.server.paths import inside, literal

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's built-in functions that call any static Java method by name
JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
RESOURCE_WORDS = frozenset({"JAR", "JARS", "FILE", "FILES", "ARCHIVE", "ARCHIVES"})
HINT = "the operator can allow it: dfsql serve --allow-jvm-functions"
#: how Spark cuts ADD JAR's raw text into paths (SparkSqlAstBuilder.visitManageResource)
_SPARK_RESOURCE = re.compile(r"""(".*?[^\\]"|'.*?[^\\]'|[^ \n\r\t"']+)""")
#: words before a name and "(" that make it a table's name and columns, not a call
_NOT_CALL = frozenset({"TABLE", "INTO", "VIEW"})


class JvmNotAllowedError(DfsqlError):
    """A statement reaches into the server's JVM or loads code."""

    sqlstate = "42501"


def check_jvm(text: str, jar_roots: Sequence[str] | None) -> None:
    """Raise :class:`JvmNotAllowedError` at the first place ``text`` reaches into the
    JVM; ``jar_roots`` are where ADD JAR may load from (None: anywhere)."""
    found = _find(text, jar_roots)
    if found is not None:
        offset, message = found
        raise Source(text).error(JvmNotAllowedError, message, offset, HINT)


def _find(text: str, roots: Sequence[str] | None) -> tuple[int, str] | None:
    """(offset, message) of the first refused place in ``text``, else None."""
    tokens, _ = scan(Source(text))
    starts = [0] + [i + 1 for i, t in enumerate(tokens) if t.text == ";"]
    for s in starts:
        found = _statement_start(text, tokens, s, roots)
        if found is not None:
            return found
    for i, t in enumerate(tokens):
        found = _call(tokens, i) or _transform(tokens, i)
        if found is None and t.is_word("EXECUTE") and _at(tokens, i + 1).is_word("IMMEDIATE") \
                and _at(tokens, i + 2).kind == "string":
            lit = tokens[i + 2]
            try:
                inner = _find(_executed(tokens, i + 2), roots)
            except DfsqlError:  # not a statement the scanner reads: Spark refuses it, or
                inner = None  # the registry lacks the functions (drop_jvm_functions)
            if inner is not None:
                found = (lit.start + 1 + inner[0], inner[1])
        if found is not None:
            return found
    return None


_NONE = Token("none", "", -1, -1, -1)


def _executed(tokens: list[Token], i: int) -> str:
    """The text of the string literal at token ``i``: the scanner reads ``'it''s'`` as
    two strings that touch, which Spark reads as one with a quote inside."""
    parts = [literal(tokens[i].text)]
    while _at(tokens, i + 1).kind == "string" and tokens[i + 1].start == tokens[i].end:
        i += 1
        parts.append(literal(tokens[i].text))
    return "'".join(parts)


def _at(tokens: list[Token], i: int) -> Token:
    return tokens[i] if 0 <= i < len(tokens) else _NONE


def _name(t: Token) -> str | None:
    """The function name a word or back-quoted token spells, lower-case."""
    if t.kind == "word":
        return t.text.lower()
    if t.kind == "quoted":
        return t.text[1:-1].replace("``", "`").lower()
    return None


def _call(tokens: list[Token], i: int) -> tuple[int, str] | None:
    """A call of a JVM function at token ``i`` (``reflect(``, ``db.reflect(``,
    ```reflect`(``, ``IDENTIFIER('reflect')(``)."""
    t = tokens[i]
    if _at(tokens, i + 1).text != "(" or _at(tokens, i - 1).upper in _NOT_CALL:
        return None
    name = _name(t)
    if name in JVM_FUNCTIONS:
        return t.start, f"{t.text}(...) calls Java methods in the server's JVM: this " \
                        "server does not run it"
    if name == "identifier" and _at(tokens, i + 2).kind == "string" and \
            _at(tokens, i + 3).text == ")" and _at(tokens, i + 4).text == "(":
        named = literal(tokens[i + 2].text).split(".")[-1].strip("`").lower()
        if named in JVM_FUNCTIONS:
            return t.start, f"IDENTIFIER('{named}')(...) calls Java methods in the " \
                            "server's JVM: this server does not run it"
    return None


def _transform(tokens: list[Token], i: int) -> tuple[int, str] | None:
    """A script transform: ``TRANSFORM(cols) [ROW FORMAT …] USING 'program'`` (the
    higher-order ``transform(array, x -> …)`` is never followed by those words)."""
    t = tokens[i]
    if not t.is_word("TRANSFORM") or _at(tokens, i + 1).text != "(":
        return None
    j = i + 2
    while j < len(tokens) and not (tokens[j].text == ")" and tokens[j].depth == t.depth):
        j += 1
    if _at(tokens, j + 1).is_word("USING", "ROW", "RECORDWRITER"):
        return t.start, "TRANSFORM(...) USING runs a program on the server: this server " \
                        "does not run it"
    return None


def _statement_start(text: str, tokens: list[Token], s: int,
                     roots: Sequence[str] | None) -> tuple[int, str] | None:
    """ADD JAR outside the roots, or CREATE FUNCTION loading code, at token ``s``."""
    first, second = _at(tokens, s), _at(tokens, s + 1)
    if first.is_word("ADD") and second.is_word(*RESOURCE_WORDS):
        end = next((t.start for t in tokens[s + 2:] if t.text == ";"), len(text))
        for m in _SPARK_RESOURCE.finditer(text, second.end, end):
            raw = m.group(0)
            path = literal(raw) if raw[0] in "'\"" else raw
            if roots is not None and not inside(path, roots):
                where = ", ".join(roots) if roots else "none configured"
                return m.start(), f"ADD {second.upper} loads code or files into the " \
                                  f"server's JVM only from under its data roots ({where}): " \
                                  f"{path!r} is outside"
        return None
    if not first.is_word("CREATE"):
        return None
    j = s + 1
    while _at(tokens, j).is_word("OR", "REPLACE", "TEMPORARY", "TEMP"):
        j += 1
    if not _at(tokens, j).is_word("FUNCTION"):
        return None
    k = j + 1
    while _at(tokens, k).is_word("IF", "NOT", "EXISTS"):
        k += 1
    while _at(tokens, k).kind in ("word", "quoted") and _at(tokens, k + 1).text == ".":
        k += 2  # a qualified name's parts
    after = _at(tokens, k + 1)
    if not (after.is_word("AS") and _at(tokens, k + 2).kind == "string"):
        return None  # a SQL function: CREATE FUNCTION f(x INT) RETURNS ... RETURN ...
    for n in range(k + 3, len(tokens)):
        if tokens[n].text == ";":
            break
        if tokens[n].is_word("USING"):
            return tokens[n].start, "CREATE FUNCTION ... USING loads code into the " \
                                    "server's JVM: this server does not allow it"
    return tokens[j].start, "CREATE FUNCTION ... AS 'class' loads a JVM class: this " \
                            "server does not allow it"


def drop_jvm_functions(spark: SparkSession) -> None:
    """Take the JVM functions out of a client session's own function registry (cloned
    from Spark's built-ins for each new session: other sessions keep theirs), so that a
    statement whose text is built at run time cannot call them either."""
    jss = getattr(spark, "_jsparkSession", None)
    if jss is None:  # Spark Connect: the Connect server's own business
        return
    jvm = spark.sparkContext._jvm
    ident = jvm.org.apache.spark.sql.catalyst.FunctionIdentifier
    registry = jss.sessionState().functionRegistry()
    for name in sorted(JVM_FUNCTIONS):
        # Spark 4.3 keys built-ins by their full name, system.builtin.<name>
        registry.dropFunction(ident.apply(name, jvm.scala.Some(jvm.java.lang.String("builtin")),
                                          jvm.scala.Some(jvm.java.lang.String("system"))))


def refusal_of(message: str) -> tuple[str, str] | None:
    """The refusal for Spark's failure to resolve a dropped JVM function (a statement
    whose text was built at run time), else None."""
    if "UNRESOLVED_ROUTINE" not in message:
        return None
    m = re.search(r"routine ((?:`[^`]*`\.?)+)", message)  # `reflect`, `builtin`.`reflect`
    name = m.group(1).rstrip(".").split("`.`")[-1].strip("`") if m else ""
    if name.lower() not in JVM_FUNCTIONS:
        return None
    return (f"{name}(...) calls Java methods in the server's JVM: this server does "
            f"not run it\n  hint: {HINT}", "42501")
