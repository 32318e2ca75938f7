"""The judge's rule for option keys (issue #52): a client may give a data source or a
function only the options it is listed for here; every other key is refused with
SQLSTATE 42501 at the place it was written.

Why an allow-list: Spark copies every option of a file source into the Hadoop
configuration it reads and writes with, so a key is a setting of the file system —
``fs.defaultFS`` and ``fs.viewfs.mounttable.*`` move a path under the data root to any
other place, ``fs.file.impl`` names a class for the JVM to load — and a few options name
files themselves (a file stream's ``cleanSource``/``sourceArchiveDir`` move what it read;
``from_xml``'s ``rowValidationXSDPath`` opens an XSD). No list of forbidden keys can
name every Hadoop setting; the keys a source or a function reads can be named. The lists
below are Spark 4's own option classes (``CSVOptions``, ``JSONOptions``,
``ParquetOptions``, ``OrcOptions``, ``TextOptions``, ``XmlOptions``, ``FileIndexOptions``,
``FileSourceOptions``, the file stream source's options, the writer's), keys read as
Spark reads them (case-insensitively), minus what names a file or is a user pattern
Hadoop matches by backtracking (``pathGlobFilter``, ``ignoredPathSegmentRegex``: write
the glob in the path instead). ``path``/``paths`` are allowed here and judged as paths.

Where options are written — ``OPTIONS (…)`` of ``CREATE TABLE|VIEW … USING`` and of
``INSERT OVERWRITE DIRECTORY``, ``WITH (…)`` on a relation (also ``STREAM t WITH (…)``),
``ALTER TABLE … SET SERDEPROPERTIES`` (a data-source table's options), ``CACHE TABLE …
OPTIONS`` (only ``storageLevel``) — are all read from Spark's parsed tree. A function's
options are the literal ``map('key', value, …)`` it is given; any other map (a column, a
variable, ``str_to_map(…)``) is known only when the statement runs, so it is refused.
``TBLPROPERTIES`` and ``DBPROPERTIES`` are not options (Spark hands them to no reader).

The rule belongs to the data roots: ``--allow-any-path`` lifts it. Under
``--allow-jvm-functions`` a data source other than the five may be used: a file source
(the five by their class names, avro, binaryFile) is held to the five's keys; another
one's keys are not judged (it runs code of its own, which no root binds).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from dfsql.server.judge_text import Refusal, start_of, unjudged
from dfsql.server.paths import PathNotAllowedError
from dfsql.spark.parsed_plan import Node, Tree

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _keys(*names: str) -> frozenset[str]:
    return frozenset(n.lower() for n in names)


#: FileIndexOptions and FileSourceOptions (every file source), the paths (judged as
#: paths), and the file writer's own options
_FILES = _keys("path", "paths", "basePath", "ignoreMissingFiles", "ignoreCorruptFiles",
               "recursiveFileLookup", "modifiedBefore", "modifiedAfter", "timeZone",
               "ignoreInvalidPartitionPaths", "maxRecordsPerFile", "partitionOverwriteMode",
               "compression", "mergeSchema")
#: the file stream source's options, without cleanSource and sourceArchiveDir
_STREAM = _keys("maxFilesPerTrigger", "maxBytesPerTrigger", "maxFileAge", "latestFirst",
                "fileNameOnly", "maxCachedFiles", "discardCachedInputRatio")
CSV = _keys(
    "charToEscapeQuoteEscaping", "charset", "codec", "columnNameOfCorruptRecord",
    "columnPruning", "comment", "compression", "dateFormat", "delimiter", "emptyValue",
    "enableDateTimeParsingFallback", "encoding", "enforceSchema", "escape", "escapeQuotes",
    "extension", "header", "ignoreLeadingWhiteSpace", "ignoreTrailingWhiteSpace",
    "inferSchema", "inputBufferSize", "lineSep", "locale", "maxCharsPerColumn",
    "maxColumns", "mode", "multiLine", "nanValue", "negativeInf", "nullValue",
    "positiveInf", "preferDate", "quote", "quoteAll", "samplingRatio", "sep",
    "singleVariantColumn", "timeFormat", "timeZone", "timestampFormat",
    "timestampNTZFormat", "unescapedQuoteHandling")
JSON = _keys(
    "allowBackslashEscapingAnyCharacter", "allowComments", "allowNonNumericNumbers",
    "allowNumericLeadingZeros", "allowSingleQuotes", "allowUnquotedControlChars",
    "allowUnquotedFieldNames", "charset", "columnNameOfCorruptRecord", "compression",
    "dateFormat", "dropFieldIfAllNull", "enableDateTimeParsingFallback", "encoding",
    "explodeEmbeddedArray", "ignoreNullFields", "inferTimestamp", "lineSep", "locale",
    "mode", "multiLine", "prefersDecimal", "pretty", "primitivesAsString",
    "samplingRatio", "singleVariantColumn", "sortKeys", "timeFormat", "timeZone",
    "timestampFormat", "timestampNTZFormat", "useUnsafeRow",
    "writeNonAsciiCharacterAsCodePoint")
#: XmlOptions without rowValidationXSDPath (it opens a file: an existence oracle, and
#: an XSD's external entity quotes another file in the error)
XML = _keys(
    "arrayElementName", "attributePrefix", "charset", "columnNameOfCorruptRecord",
    "compression", "dateFormat", "declaration", "encoding", "excludeAttribute",
    "ignoreNamespace", "ignoreSurroundingSpaces", "indent", "inferSchema", "locale",
    "mode", "multiLine", "nullValue", "preferDate", "prefersDecimal", "rootTag", "rowTag",
    "samplingRatio", "singleVariantColumn", "timeFormat", "timeZone", "timestampFormat",
    "timestampNTZFormat", "useLegacyXMLParser", "validateName", "valueTag",
    "wildcardColName")
PARQUET = _keys("compression", "datetimeRebaseMode", "int96RebaseMode", "mergeSchema",
                "parquet.compression")
ORC = _keys("compression", "mergeSchema", "orc.compress")
TEXT = _keys("compression", "encoding", "lineSep", "wholetext")
#: the option keys a client may give each data source it may use
SOURCE_KEYS: dict[str, frozenset[str]] = {
    "parquet": _FILES | _STREAM | PARQUET, "orc": _FILES | _STREAM | ORC,
    "csv": _FILES | _STREAM | CSV, "json": _FILES | _STREAM | JSON,
    "text": _FILES | _STREAM | TEXT}
#: a table's options whose source the parsed tree does not name (``t WITH (…)``)
ANY_SOURCE = frozenset().union(*SOURCE_KEYS.values())
#: Spark's own key on an INSERT's target; CACHE TABLE's one option
_SPARKS = _keys("__required_write_privileges__")
_CACHE = _keys("storageLevel")
_AVRO = _keys("mode", "datetimeRebaseMode", "enableStableIdentifiersForUnionType",
              "stableIdentifierPrefixForUnionType", "recursiveFieldMaxDepth")
_PROTOBUF = _keys("mode", "recursive.fields.max.depth", "convert.any.fields.to.json",
                  "emit.default.values", "enums.as.ints", "upcast.unsigned.ints",
                  "unwrap.primitive.wrapper.types", "retain.empty.message.types")
#: function -> (the index of its options argument, the keys it may take)
FUNCTION_KEYS: dict[str, tuple[int, frozenset[str]]] = {
    "from_json": (2, JSON), "to_json": (1, JSON), "schema_of_json": (1, JSON),
    "from_csv": (2, CSV), "to_csv": (1, CSV), "schema_of_csv": (1, CSV),
    "from_xml": (2, XML), "to_xml": (1, XML), "schema_of_xml": (1, XML),
    "from_avro": (2, _AVRO), "to_avro": (2, _AVRO), "schema_of_avro": (1, _AVRO),
    # the third argument names a descriptor file (or holds its bytes): refused as one
    "from_protobuf": (2, _PROTOBUF), "to_protobuf": (2, _PROTOBUF)}
#: the fields of a node that hold a data source's options (TBLPROPERTIES' ``properties``
#: and DBPROPERTIES are not options)
_MAPS = frozenset({"options", "storage.properties", "serdeproperties",
                   "serde.serdeproperties"})
_HINT = "ask the operator to allow any option (dfsql serve --allow-any-path)"

#: a data source's name -> the one of the five it is, "" for a source that reads no
#: files (its keys unjudged), None for a file source spelt otherwise (``USING
#: org.….TextFileFormat``) or a name that is no data source (a database's): held to
#: every file source's keys
Sources = Callable[[str], str | None]
#: ``IDENTIFIER('…')``'s literal -> its name's parts
Names = Callable[[str], Sequence[str]]


def reads_files(spark: SparkSession, cls: str) -> bool:
    """Is data-source class ``cls`` one of Spark's file sources (a ``FileFormat`` or a
    ``FileDataSourceV2``): a spelling of the five by class, or another file source
    (avro, binaryFile), whose options Spark hands to Hadoop just the same?"""
    jvm = spark.sparkContext._jvm
    try:
        loaded = jvm.org.apache.spark.util.Utils.classForName(cls, True, False)
    except Exception:  # noqa: BLE001 (not loadable here: Spark cannot load it either)
        return False
    pkg = "org.apache.spark.sql.execution.datasources."
    return any(jvm.org.apache.spark.util.Utils.classForName(base, True, False)
               .isAssignableFrom(loaded)
               for base in (pkg + "FileFormat", pkg + "v2.FileDataSourceV2"))


def option_refusal(text: str, tree: Tree, node: Node, source: Sources,
                   names: Names) -> Refusal | None:
    """The first option key of ``node`` a client may not give, or None."""
    for path, _ in node.values:
        owner, _, key = path.partition("[")
        if key and owner.lower() in _MAPS:
            allowed = _allowed_for(node, source)
            if allowed is not None and key[:-1].lower() not in allowed:
                return _refused(text, node, key[:-1], _what(node, source))
    if node.name == "OptionList":
        parent = tree.nodes[node.parent] if node.parent >= 0 else node
        allowed = _provider_keys(parent, source)
        for path, key in node.values:
            if path.endswith("._1") and allowed is not None and key.lower() not in allowed:
                return _refused(text, node, key, _what(parent, source))
    if node.name == "UnresolvedFunction":
        parts = node.values_under("nameParts")
        return _function(text, tree, node, parts[-1] if parts else "", "arguments.")
    if node.name == "ExpressionWithUnresolvedIdentifier":
        lit = tree.child(node, "identifierExpr")
        value = lit.value("value") if lit is not None and lit.name == "Literal" else None
        try:
            parts = list(names(value)) if value is not None else []
        except Exception:  # noqa: BLE001 (not a name: Spark refuses it when it runs)
            parts = []
        return _function(text, tree, node, parts[-1] if parts else "", "otherExprs.")
    return None


def _keys_of(name: str | None, source: Sources) -> frozenset[str] | None:
    """A named source's keys (None: another source, unjudged; a name that is none, or
    no name — the session's default source — is held to every file source's keys)."""
    known = source(name) if name is not None else None
    if known == "":
        return None
    return SOURCE_KEYS[known] if known is not None else ANY_SOURCE


def _provider_keys(node: Node, source: Sources) -> frozenset[str] | None:
    return _keys_of(node.value("provider"), source)


def _allowed_for(node: Node, source: Sources) -> frozenset[str] | None:
    """The keys ``node``'s options may have (None: a source this rule does not judge)."""
    if node.name in ("CacheTable", "CacheTableAsSelect"):
        return _CACHE
    if node.name == "UnresolvedRelation":  # ``format.`path``` or a table (any source)
        parts = node.values_under("multipartIdentifier")
        keys = _keys_of(parts[0] if len(parts) == 2 else None, source)
        return None if keys is None else keys | _SPARKS
    return _provider_keys(node, source)


def _what(node: Node, source: Sources) -> str:
    if node.name in ("CacheTable", "CacheTableAsSelect"):
        return "CACHE TABLE"
    provider = node.value("provider")
    if node.name == "UnresolvedRelation":
        parts = node.values_under("multipartIdentifier")
        provider = parts[0] if len(parts) == 2 and source(parts[0]) else None
    return f"the data source {provider}" if provider else "a table's data source"


def _function(text: str, tree: Tree, node: Node, name: str,
              prefix: str) -> Refusal | None:
    """A function's options: a literal ``map('key', …)`` of keys it may take (and
    protobuf's descriptor as bytes, never a file's name)."""
    at, allowed = FUNCTION_KEYS.get(name.lower(), (-1, frozenset()))
    if at < 0:
        return None
    args = sorted((c for c in tree.children(node) if c.field.startswith(prefix)),
                  key=lambda c: int(c.field[len(prefix):]))
    for i, arg in enumerate(args[at:]):
        if arg.name == "NamedArgumentExpression" and tree.children(arg):
            arg = tree.children(arg)[0]
        if i == 0 and name.lower().endswith("protobuf") and not _is_map(arg):
            if arg.name == "Literal" and arg.value("dataType") == "BinaryType":
                continue
            return _refused(text, arg, arg.value("value") or name, f"{name}(…)",
                            "names a descriptor file: this server lets a client give "
                            "only the descriptor's bytes (X'…')")
        found = _map_refusal(text, tree, arg, name, allowed)
        if found is not None:
            return found
    return None


def _is_map(arg: Node) -> bool:
    parts = arg.values_under("nameParts")
    return arg.name == "UnresolvedFunction" and bool(parts) and parts[-1].lower() == "map"


def _map_refusal(text: str, tree: Tree, arg: Node, name: str,
                 allowed: frozenset[str]) -> Refusal | None:
    if not _is_map(arg):
        return unjudged(text, arg, f"the options of {name}(…) are not a map('key', value, "
                        "…) of literal keys, so they are known only when the statement "
                        "runs, and this server judges a statement before it runs",
                        "write the options as map('key', 'value', …)")
    items = sorted((c for c in tree.children(arg) if c.field.startswith("arguments.")),
                   key=lambda c: int(c.field[len("arguments."):]))
    for key in items[::2]:
        value = key.value("value") if key.name == "Literal" else None
        if value is None:
            return unjudged(text, key, f"an option key of {name}(…) that is not a "
                            "literal is known only when the statement runs",
                            "write the key as a string literal")
        if value.lower() not in allowed:
            return _refused(text, key, value, f"{name}(…)")
    return None


def _refused(text: str, node: Node, key: str, what: str, why: str = "") -> Refusal:
    reason = why or ("is not an option this server lets a client give it (Spark hands a "
                     "source's options to Hadoop as its configuration, and some name "
                     "files)")
    at = _locate_key(text, node, key)
    begin = at + 1 if text[at:at + 1] in ("'", '"', "`") else at
    if text[begin:begin + len(key)].lower() == key.lower():  # as written, not lowered
        key = text[begin:begin + len(key)]
    return Refusal(PathNotAllowedError, f"the option {key!r} of {what} {reason}",
                   _HINT, at, key)


def _locate_key(text: str, node: Node, key: str) -> int:
    """Where ``key`` is written from ``node``'s start on (Spark lower-cases a relation's
    ``WITH`` keys, written after the node's own text): at its quote, else the node."""
    start = start_of(node)
    at = text.lower().find(key.lower(), start)
    if at < 0:
        return start
    return at - 1 if at > 0 and text[at - 1] in "'\"`" else at
