"""The metadata calls JDBC tools make (GetTables, GetColumns, ...), as small result sets
with the columns JDBC's ``DatabaseMetaData`` names. Temp views (the session's own,
where dfsql's windowed views live) are listed with an empty schema, as Spark's server
lists them."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from dfsql.server.patterns import compile_regex
from dfsql.spark import door

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType, StructType

#: java.sql.Types of Spark's types (what GetColumns and GetTypeInfo report)
JDBC_TYPES = {
    "boolean": 16, "tinyint": -6, "smallint": 5, "int": 4, "bigint": -5, "float": 6,
    "double": 8, "string": 12, "char": 1, "varchar": 12, "decimal": 3, "date": 91,
    "timestamp": 93, "timestamp_ntz": 93, "binary": -2, "array": 2003, "map": 2000,
    "struct": 2002, "void": 0, "interval": 1111,
}


def _jdbc_to_hive(pattern: str, wildcard: str = "*") -> str:
    """Hive's ``MetadataOperation.convertPattern``, regex for regex (Java's replaceAll and
    re.sub both replace left to right without overlap): an unescaped ``%`` becomes
    ``wildcard`` (``*`` in its datanucleus form, ``.*`` in its regex form), an unescaped
    ``_`` becomes ``.``, and ``\\%``/``\\_`` become literal ``%``/``_``. Its quirks come along (``a%%`` keeps the second ``%``)."""
    out = re.sub(r"([^\\])%", lambda m: m.group(1) + wildcard, pattern)
    out = re.sub(r"\\%", "%", out)
    out = re.sub(r"^%", wildcard, out)
    out = re.sub(r"([^\\])_", r"\1.", out)
    out = re.sub(r"\\_", "_", out)
    return re.sub(r"^_", ".", out)


#: what Java's String.trim() removes: every character up to and including the space
_JAVA_TRIM = "".join(chr(i) for i in range(33))


def _spark_filter(pattern: str) -> Callable[[str], bool]:
    """Spark's ``StringUtils.filterPattern`` (SessionCatalog.listDatabases/listTables/
    listFunctions): trimmed, split on ``|``; each part with ``*`` as ``.*`` is a
    case-insensitive (ASCII, as Java's ``(?i)``) regex over the whole name; a part that is
    no valid regex matches nothing. The regex runs in linear time
    (:func:`dfsql.server.patterns.compile_regex`), never in Python's backtracking ``re``."""
    parts = [compile_regex(sub.replace("*", ".*"), ignore_case=True)
             for sub in pattern.strip(_JAVA_TRIM).split("|")]
    return lambda name: any(match(name) for match in parts)


def name_matcher(pattern: str | None, kind: str) -> Callable[[str], bool]:
    """Whether a name matches a metadata call's pattern, as Spark's own Thrift server
    decides, so a client sees the same names from dfsql as from Spark (impyla sends
    ``.*``, JDBC tools ``%``). ``kind`` is which argument the pattern is:

    * ``schema`` (SparkGetSchemasOperation et al.): NULL or empty is all; otherwise
      Hive's JDBC conversion, then Spark's filterPattern (``*``, ``|``, regex, any case).
    * ``table``: the same conversion and filter.
    * ``column`` (SparkGetColumnsOperation): Hive's conversion in its regex form
      (``%`` is ``.*``), then a case-sensitive Java regex over the whole name.
    * ``function`` (SparkGetFunctionsOperation): the pattern goes to filterPattern as
      sent, so ``%`` and ``_`` are no wildcards there.

    Where Spark would match nothing for an empty table, column or function pattern, or
    fail on NULL, dfsql matches every name: JDBC says an empty/NULL pattern drops the
    criterion, and no client asks for "nothing" that way."""
    if pattern is None or pattern == "":
        return lambda name: True
    if kind in ("schema", "table"):
        return _spark_filter(_jdbc_to_hive(pattern))
    if kind == "function":
        return _spark_filter(pattern)
    if kind == "column":
        return compile_regex(_jdbc_to_hive(pattern, ".*"))
    raise ValueError(f"unknown pattern kind {kind!r}")


def _result(columns: list[tuple[str, str]], rows: list[tuple]) -> tuple[StructType, pa.Table]:
    """A result set from (name, Spark SQL type) columns and Python rows."""
    import pyarrow as pa
    from pyspark.sql.types import StructType, _parse_datatype_string

    schema = StructType.fromJson({"type": "struct", "fields": [
        {"name": n, "type": _parse_datatype_string(t).jsonValue(), "nullable": True,
         "metadata": {}} for n, t in columns]})
    arrow_types = {"string": pa.string(), "int": pa.int32(), "bigint": pa.int64(),
                   "smallint": pa.int16(), "boolean": pa.bool_()}
    arrays = [pa.array([r[i] for r in rows], arrow_types[t]) for i, (_, t) in enumerate(columns)]
    return schema, pa.Table.from_arrays(arrays, names=[n for n, _ in columns])


def _type_name(dt: DataType) -> str:
    return dt.simpleString().split("(")[0].split("<")[0]


def type_info(spark: SparkSession):
    cols = [("TYPE_NAME", "string"), ("DATA_TYPE", "int"), ("PRECISION", "int"),
            ("LITERAL_PREFIX", "string"), ("LITERAL_SUFFIX", "string"),
            ("CREATE_PARAMS", "string"), ("NULLABLE", "smallint"), ("CASE_SENSITIVE", "boolean"),
            ("SEARCHABLE", "smallint"), ("UNSIGNED_ATTRIBUTE", "boolean"),
            ("FIXED_PREC_SCALE", "boolean"), ("AUTO_INCREMENT", "boolean"),
            ("LOCAL_TYPE_NAME", "string"), ("MINIMUM_SCALE", "smallint"),
            ("MAXIMUM_SCALE", "smallint"), ("SQL_DATA_TYPE", "int"), ("SQL_DATETIME_SUB", "int"),
            ("NUM_PREC_RADIX", "int")]
    precision = {"boolean": None, "tinyint": 3, "smallint": 5, "int": 10, "bigint": 19,
                 "float": 7, "double": 15, "decimal": 38, "string": None, "binary": None,
                 "date": None, "timestamp": None, "array": None, "map": None, "struct": None,
                 "void": None}
    rows = []
    for name, p in precision.items():
        numeric = p is not None
        rows.append((name.upper(), JDBC_TYPES[name], p, None, None, None, 1,
                     name == "string", 3 if name not in ("array", "map", "struct") else 0,
                     not numeric, False, False, None, 0, 0, None, None, 10 if numeric else None))
    return _result(cols, rows)


def catalogs(spark: SparkSession):
    return _result([("TABLE_CAT", "string")], [])


def schemas(spark: SparkSession, pattern: str | None):
    match = name_matcher(pattern, "schema")
    rows = [(db.name, "") for db in spark.catalog.listDatabases() if match(db.name)]
    return _result([("TABLE_SCHEM", "string"), ("TABLE_CATALOG", "string")], rows)


def _tables(spark: SparkSession, schema_pattern: str | None, table_pattern: str | None):
    """(schema, name, is_view, table) of every matching table and temp view."""
    srx, trx = name_matcher(schema_pattern, "schema"), name_matcher(table_pattern, "table")
    out = []
    seen_temp = set()
    for db in spark.catalog.listDatabases():
        if not srx(db.name):
            continue
        for t in spark.catalog.listTables(db.name):
            if t.isTemporary:
                continue
            if trx(t.name):
                out.append((db.name, t.name, t.tableType == "VIEW", t))
    # Spark's GetTables/GetColumns list the session's temp views whatever the schema
    # pattern (they belong to no schema), so impyla's ``.*`` or a JDBC ``%`` see them too
    for t in spark.catalog.listTables():
        if t.isTemporary and t.name not in seen_temp and trx(t.name):
            seen_temp.add(t.name)
            out.append(("", t.name, True, t))
    return out


def tables(spark: SparkSession, schema_pattern, table_pattern, types):
    wanted = {t.upper() for t in types} if types else None
    rows = []
    for schema, name, is_view, t in _tables(spark, schema_pattern, table_pattern):
        kind = "VIEW" if is_view else "TABLE"
        if wanted is not None and kind not in wanted:
            continue
        rows.append(("", schema, name, kind, t.description or ""))
    return _result([("TABLE_CAT", "string"), ("TABLE_SCHEM", "string"),
                    ("TABLE_NAME", "string"), ("TABLE_TYPE", "string"),
                    ("REMARKS", "string")], rows)


def table_types(spark: SparkSession):
    return _result([("TABLE_TYPE", "string")], [("TABLE",), ("VIEW",)])


def columns(spark: SparkSession, schema_pattern, table_pattern, column_pattern):
    from pyspark.sql import types as T  # noqa: N812

    crx = name_matcher(column_pattern, "column")
    rows = []
    for schema, name, _, _ in _tables(spark, schema_pattern, table_pattern):
        # each part one name, back-quotes doubled (a view may be named json`.`/etc)
        full = ".".join(f"`{p.replace('`', '``')}`" for p in (schema, name) if p)
        for i, f in enumerate(door.table(spark, full).schema.fields):
            if not crx(f.name):
                continue
            dt = f.dataType
            tname = _type_name(dt)
            size = digits = None
            if isinstance(dt, T.DecimalType):
                size, digits = dt.precision, dt.scale
            elif tname in ("tinyint", "smallint", "int", "bigint", "float", "double"):
                size = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 19, "float": 7,
                        "double": 15}[tname]
                digits = 0 if tname not in ("float", "double") else None
            rows.append(("", schema, name, f.name, JDBC_TYPES.get(tname, 1111),
                         dt.simpleString().upper(), size, None, digits,
                         10 if size is not None else None, 1 if f.nullable else 0,
                         f.metadata.get("comment", ""), None, None, None, None, i + 1,
                         "YES" if f.nullable else "NO", None, None, None, None, "NO"))
    cols = [("TABLE_CAT", "string"), ("TABLE_SCHEM", "string"), ("TABLE_NAME", "string"),
            ("COLUMN_NAME", "string"), ("DATA_TYPE", "int"), ("TYPE_NAME", "string"),
            ("COLUMN_SIZE", "int"), ("BUFFER_LENGTH", "smallint"), ("DECIMAL_DIGITS", "int"),
            ("NUM_PREC_RADIX", "int"), ("NULLABLE", "int"), ("REMARKS", "string"),
            ("COLUMN_DEF", "string"), ("SQL_DATA_TYPE", "int"), ("SQL_DATETIME_SUB", "int"),
            ("CHAR_OCTET_LENGTH", "int"), ("ORDINAL_POSITION", "int"),
            ("IS_NULLABLE", "string"), ("SCOPE_CATALOG", "string"), ("SCOPE_SCHEMA", "string"),
            ("SCOPE_TABLE", "string"), ("SOURCE_DATA_TYPE", "smallint"),
            ("IS_AUTO_INCREMENT", "string")]
    return _result(cols, rows)


def functions(spark: SparkSession, schema_pattern, function_pattern):
    frx = name_matcher(function_pattern, "function")
    rows = [("", f.namespace[0] if f.namespace else "", f.name, f.description or "", 0,
             f.className or f.name)
            for f in spark.catalog.listFunctions() if frx(f.name)]
    return _result([("FUNCTION_CAT", "string"), ("FUNCTION_SCHEM", "string"),
                    ("FUNCTION_NAME", "string"), ("REMARKS", "string"),
                    ("FUNCTION_TYPE", "int"), ("SPECIFIC_NAME", "string")], rows)


def primary_keys(spark: SparkSession):
    return _result([("TABLE_CAT", "string"), ("TABLE_SCHEM", "string"),
                    ("TABLE_NAME", "string"), ("COLUMN_NAME", "string"), ("KEY_SEQ", "int"),
                    ("PK_NAME", "string")], [])


def cross_reference(spark: SparkSession):
    names = ["PKTABLE_CAT", "PKTABLE_SCHEM", "PKTABLE_NAME", "PKCOLUMN_NAME", "FKTABLE_CAT",
             "FKTABLE_SCHEM", "FKTABLE_NAME", "FKCOLUMN_NAME", "KEY_SEQ", "UPDATE_RULE",
             "DELETE_RULE", "FK_NAME", "PK_NAME", "DEFERRABILITY"]
    return _result([(n, "int" if n in ("KEY_SEQ", "UPDATE_RULE", "DELETE_RULE",
                                       "DEFERRABILITY") else "string") for n in names], [])
