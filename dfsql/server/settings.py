"""The settings a client of the endpoint may change: its session's own, never one that
reaches past it (static, core, catalog or legacy settings: ``spark.jars``,
``spark.sql.catalog.*``, ``spark.sql.legacy.*`` let a client load code or undo a
guard). Read by the judge on ``SET`` and ``RESET`` nodes of Spark's parsed plan, and by
the service on the settings a client sends when it opens a session.
"""

from __future__ import annotations

import re

from dfsql.spark.parsed_plan import Node

#: the settings a client may SET: its session's own (time, partitions, SQL dialect,
#: file formats' options); never a static, core, catalog or legacy setting
SETTINGS = frozenset({
    "spark.sql.session.timeZone", "spark.sql.shuffle.partitions", "spark.sql.ansi.enabled",
    "spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
    "spark.sql.adaptive.skewJoin.enabled", "spark.sql.autoBroadcastJoinThreshold",
    "spark.sql.caseSensitive", "spark.sql.files.maxPartitionBytes",
    "spark.sql.files.maxRecordsPerFile", "spark.sql.sources.partitionOverwriteMode",
    "spark.sql.storeAssignmentPolicy", "spark.sql.timestampType",
    "spark.sql.parquet.compression.codec", "spark.sql.orc.compression.codec",
    "spark.sql.csv.filterPushdown.enabled", "spark.sql.json.filterPushdown.enabled",
    "spark.sql.execution.arrow.maxRecordsPerBatch", "spark.sql.maxMetadataStringLength",
    "spark.sql.mapKeyDedupPolicy", "spark.sql.datetime.java8API.enabled",
})
#: dfsql's own settings, and the values each may take (Spark checks the values of its
#: own settings; a free-form value could be substituted into a statement as ``${key}``)
DFSQL_SETTINGS = {"dfsql.stream.native": re.compile(r"(?i)true|false"),
                  "dfsql.replay.aggregateKernels": re.compile(r"(?i)true|false"),
                  "dfsql.stream.buckets": re.compile(r"\d{1,6}")}
#: a setting whose value a client may not even read (Spark's own redaction pattern)
_SECRET = re.compile(r"(?i)secret|password|token|access[.]?key|credential")


#: Spark's substitution of ``${env:…}``, ``${system:…}`` and ``${setting}`` in a
#: statement's text: off in every client session, where ``${…}`` is text (it would hand
#: a client the server's environment, JVM properties and settings, secrets included);
#: not a setting a client may SET or RESET, and set again before each statement (a
#: bare ``RESET`` returns every setting to the operator's, this one with them)
SUBSTITUTE = "spark.sql.variable.substitute"


def text_only(spark) -> None:
    """No ``${…}`` substitution in ``spark`` (an endpoint client's session, or a kept
    query's: one dfsql made for it, so set for good, never restored:
    :func:`dfsql.session.setting_while` is for a session dfsql does not own)."""
    spark.conf.set(SUBSTITUTE, "false")


def setting_allowed(key: str, value: str | None = None) -> bool:
    """May a client set ``key`` (to ``value``; None: only read or reset it)?"""
    if key in SETTINGS:
        return True
    check = DFSQL_SETTINGS.get(key)
    return check is not None and (value is None or check.fullmatch(value.strip()) is not None)


def setting_refusal(key: str) -> str:
    return (f"SET {key}: a client of this server changes only its session's own "
            "settings (time zone, shuffle partitions, ANSI mode, file formats' options "
            "and the like, and dfsql's own with their values); this one is not among them")


def setting_rule(node: Node) -> tuple[str, str] | None:
    """(message, key) refusing a ``SET key=value`` of a setting not a session's own, a
    ``SET key`` that would show a secret, a ``RESET key`` of a setting not a session's
    own (``RESET`` alone returns to the operator's settings); None for the rest."""
    key = node.value("kv._1") if node.name == "SetCommand" else node.value("config")
    value = node.value("kv._2") if node.name == "SetCommand" else None
    if key is None or key == "-v" or setting_allowed(key.strip(), value):
        return None
    key = key.strip()
    if node.name == "SetCommand" and value is None:
        if not _SECRET.search(key):
            return None  # reading a setting
        return f"SET {key} would show a secret: this server does not", key
    if node.name == "ResetCommand":
        return setting_refusal(key).replace("SET", "RESET", 1), key
    return setting_refusal(key), key
