"""What the endpoint refuses, and the last line of defence behind its judgement.

The judgement itself (:mod:`dfsql.server.judge`) reads Spark's parsed plan of each
statement. Two things here do not depend on it: a client session's function registry
lacks the JVM functions (:func:`drop_jvm_functions`), so a name that only exists when the
statement runs still cannot reach them, and Spark's "cannot resolve" for one of them
becomes the same refusal (:func:`refusal_of`).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from dfsql.errors import DfsqlError

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

#: Spark's built-in functions that call any static Java method by name
JVM_FUNCTIONS = frozenset({"reflect", "java_method", "try_reflect"})
HINT = "the operator can allow it: dfsql serve --allow-jvm-functions"


class NotAllowedError(DfsqlError):
    """A statement does what this server does not let a client do."""

    sqlstate = "42501"


class JvmNotAllowedError(NotAllowedError):
    """A statement reaches into the server's JVM, runs a program or loads code."""


def drop_jvm_functions(spark: SparkSession) -> None:
    """Take the JVM functions out of a client session's own function registry (cloned
    from Spark's built-ins for each new session: other sessions keep theirs), so that a
    name resolved only when the statement runs cannot call them either."""
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
    """The refusal for Spark's failure to resolve a dropped JVM function, else None."""
    if "UNRESOLVED_ROUTINE" not in message:
        return None
    m = re.search(r"routine ((?:`[^`]*`\.?)+)", message)  # `reflect`, `builtin`.`reflect`
    name = m.group(1).rstrip(".").split("`.`")[-1].strip("`") if m else ""
    if name.lower() not in JVM_FUNCTIONS:
        return None
    return (f"{name}(...) calls Java methods in the server's JVM: this server does "
            f"not run it\n  hint: {HINT}", "42501")
