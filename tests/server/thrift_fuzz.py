"""Building and mutating TCLIService messages for tests/server/test_protocol_fuzz.py.

Valid requests are encoded by the thrift library (what PyHive sends: the same generated
classes), then read back into a small tree of the binary protocol's values, so that a
mutation can be structural (a field dropped, renumbered, of another type, an extreme
value: the message still decodes, and the server must answer it and keep the
connection) or on the bytes (flipped, truncated, a length of 0x7fffffff, random: the
server may end the connection, and must do no more than that). Everything is drawn
from a ``random.Random`` given a seed, so a failure repeats.
"""

from __future__ import annotations

import random
import struct

from thrift.protocol import TBinaryProtocol
from thrift.Thrift import TMessageType
from thrift.transport import TTransport

from dfsql.server.tcli import TCLIService
from dfsql.server.tcli import ttypes as tt

BOOL, BYTE, DOUBLE, I16, I32, I64, STRING, STRUCT, MAP, SET, LIST = (
    2, 3, 4, 6, 8, 10, 11, 12, 13, 14, 15)
_FIXED = {BOOL: ">B", BYTE: ">b", DOUBLE: ">d", I16: ">h", I32: ">i", I64: ">q"}
_LIMITS = {BYTE: 8, I16: 16, I32: 32, I64: 64}
HUGE = (0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, 0x40000000)

# ----------------------------------------------------------------- the binary protocol


def read_value(read, ttype: int):
    """One value of ``ttype`` from ``read(n)`` (exactly n bytes): a struct is a list of
    [field id, type, value], a list or set (element type, items), a map (key type,
    value type, [(key, value)])."""
    if ttype in _FIXED:
        fmt = _FIXED[ttype]
        return struct.unpack(fmt, read(struct.calcsize(fmt)))[0]
    if ttype == STRING:
        return read(struct.unpack(">i", read(4))[0])
    if ttype == STRUCT:
        fields = []
        while (ftype := read(1)[0]) != 0:
            fid = struct.unpack(">h", read(2))[0]
            fields.append([fid, ftype, read_value(read, ftype)])
        return fields
    if ttype in (LIST, SET):
        etype, size = struct.unpack(">bi", read(5))
        return etype, [read_value(read, etype) for _ in range(size)]
    if ttype == MAP:
        ktype, vtype, size = struct.unpack(">bbi", read(6))
        return ktype, vtype, [(read_value(read, ktype), read_value(read, vtype))
                              for _ in range(size)]
    raise ValueError(f"type {ttype}")


def write_value(ttype: int, value, out: bytearray, marks: list | None = None) -> None:
    """Encode ``value``; ``marks`` collects (kind, offset) of every length ("len") and
    field type ("type") written, the places a byte mutation aims at."""
    if ttype in _FIXED:
        out += struct.pack(_FIXED[ttype], value)
    elif ttype == STRING:
        _mark(marks, "len", out)
        out += struct.pack(">i", len(value)) + value
    elif ttype == STRUCT:
        for fid, ftype, v in value:
            _mark(marks, "type", out)
            out += struct.pack(">bh", ftype, fid)
            write_value(ftype, v, out, marks)
        out += b"\0"
    elif ttype in (LIST, SET):
        out += struct.pack(">b", value[0])
        _mark(marks, "len", out)
        out += struct.pack(">i", len(value[1]))
        for v in value[1]:
            write_value(value[0], v, out, marks)
    elif ttype == MAP:
        out += struct.pack(">bb", value[0], value[1])
        _mark(marks, "len", out)
        out += struct.pack(">i", len(value[2]))
        for k, v in value[2]:
            write_value(value[0], k, out, marks)
            write_value(value[1], v, out, marks)


def _mark(marks: list | None, kind: str, out: bytearray) -> None:
    if marks is not None:
        marks.append((kind, len(out)))


def read_message(read) -> tuple[str, int, int, list]:
    """A strict binary-protocol message: (name, message type, sequence id, its struct)."""
    version = struct.unpack(">i", read(4))[0]
    name = read(struct.unpack(">i", read(4))[0]).decode("utf-8", "replace")
    seqid = struct.unpack(">i", read(4))[0]
    return name, version & 0xFF, seqid, read_value(read, STRUCT)


def write_message(name: str, seqid: int, fields: list, marks: list | None = None) -> bytes:
    out = bytearray(struct.pack(">I", 0x80010000 | TMessageType.CALL))
    _mark(marks, "len", out)
    out += struct.pack(">i", len(name.encode())) + name.encode() + struct.pack(">i", seqid)
    write_value(STRUCT, fields, out, marks)
    return bytes(out)


def encode_call(name: str, req, seqid: int = 1) -> bytes:
    """A call as the thrift library (and so PyHive) encodes it."""
    buf = TTransport.TMemoryBuffer()
    proto = TBinaryProtocol.TBinaryProtocol(buf)
    proto.writeMessageBegin(name, TMessageType.CALL, seqid)
    getattr(TCLIService, name + "_args")(req=req).write(proto)
    proto.writeMessageEnd()
    return buf.getvalue()


def parse(data: bytes) -> tuple[str, int, int, list]:
    pos = 0

    def read(n: int) -> bytes:
        nonlocal pos
        if n < 0 or pos + n > len(data):
            raise EOFError
        pos += n
        return data[pos - n:pos]

    return read_message(read)


# ----------------------------------------------------------------- valid requests


def handle_id(rng: random.Random) -> tt.THandleIdentifier:
    """A handle no server gave out (ASCII bytes: valid as text wherever they land)."""
    return tt.THandleIdentifier(guid=rng.randbytes(16).hex()[:16].encode(),
                                secret=b"s" * 16)


def requests(session: tt.TSessionHandle, op: tt.TOperationHandle) -> list[tuple[str, object]]:
    """One request of each kind PyHive and beeline send, on these handles."""
    return [
        ("OpenSession", tt.TOpenSessionReq(
            client_protocol=tt.TProtocolVersion.HIVE_CLI_SERVICE_PROTOCOL_V10,
            username="fuzz", password="pw", configuration={"use:database": "default"})),
        ("GetInfo", tt.TGetInfoReq(sessionHandle=session,
                                   infoType=tt.TGetInfoType.CLI_SERVER_NAME)),
        ("ExecuteStatement", tt.TExecuteStatementReq(
            sessionHandle=session, statement="SELEC 1 AS x", runAsync=False,
            confOverlay={"k": "v"})),
        ("GetOperationStatus", tt.TGetOperationStatusReq(operationHandle=op)),
        ("GetResultSetMetadata", tt.TGetResultSetMetadataReq(operationHandle=op)),
        ("FetchResults", tt.TFetchResultsReq(
            operationHandle=op, orientation=tt.TFetchOrientation.FETCH_NEXT, maxRows=100)),
        ("FetchResults", tt.TFetchResultsReq(
            operationHandle=op, orientation=tt.TFetchOrientation.FETCH_FIRST, maxRows=10,
            fetchType=1)),
        ("GetTables", tt.TGetTablesReq(sessionHandle=session, schemaName="nope_%",
                                       tableName="%", tableTypes=["TABLE", "VIEW"])),
        ("GetSchemas", tt.TGetSchemasReq(sessionHandle=session, schemaName="nope_%")),
        ("CancelOperation", tt.TCancelOperationReq(operationHandle=op)),
        ("CloseOperation", tt.TCloseOperationReq(operationHandle=op)),
        ("GetLog", tt.TGetLogReq(operationHandle=op)),  # not in the service: unknown
        ("CloseSession", tt.TCloseSessionReq(sessionHandle=session)),
    ]


def stray_handles(rng: random.Random) -> tuple[tt.TSessionHandle, tt.TOperationHandle]:
    return (tt.TSessionHandle(sessionId=handle_id(rng)),
            tt.TOperationHandle(operationId=handle_id(rng), hasResultSet=True,
                                operationType=tt.TOperationType.EXECUTE_STATEMENT))


# ----------------------------------------------------------------- structural mutations

_SCALARS = (BOOL, BYTE, DOUBLE, I16, I32, I64, STRING)


def random_value(rng: random.Random, ttype: int, depth: int = 0):
    if ttype == BOOL:
        return rng.randrange(256)
    if ttype == DOUBLE:
        return rng.choice([0.0, -1.5, float("inf"), float("nan"), 1e308])
    if ttype in _LIMITS:
        bits = _LIMITS[ttype]
        return rng.choice([0, 1, -1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)),
                           rng.randrange(-(2 ** (bits - 1)), 2 ** (bits - 1))])
    if ttype == STRING:
        text = "".join(rng.choice("ab%_'\"\\ é€\U0001F600;\n") for _ in range(rng.randrange(40)))
        return (text * rng.choice([1, 1, 1, 500])).encode()
    if ttype == STRUCT:
        return [[rng.randrange(1, 40), t, random_value(rng, t, depth + 1)]
                for t in rng.sample(_SCALARS + ((STRUCT,) if depth < 8 else ()), 2)]
    if ttype == LIST:
        return I64, [rng.randrange(-9, 9) for _ in range(rng.choice([0, 3, 100]))]
    return STRING, STRING, [(b"k%d" % i, b"v") for i in range(rng.choice([0, 2, 50]))]


def _all_fields(fields: list, out: list) -> list:
    """Every [fid, type, value] of a struct and of the structs inside it."""
    for field in fields:
        out.append((fields, field))
        if field[1] == STRUCT:
            _all_fields(field[2], out)
    return out


def mutate_structure(rng: random.Random, name: str, fields: list) -> str:
    """Change the decoded message in place so that it still decodes: the server has to
    answer it (an error at worst) and keep the connection. Returns the method name."""
    found = _all_fields(fields, [])
    owner, field = rng.choice(found) if found else (fields, None)
    op = rng.choice(["drop", "renumber", "retype", "value", "value", "extra", "rename"])
    if field is None or op == "extra":
        owner.append([rng.randrange(100, 32767), STRUCT, random_value(rng, STRUCT)])
    elif op == "drop":
        owner.remove(field)
    elif op == "renumber":  # to a field id no request has: skipped, so maybe missing
        field[0] = rng.choice([rng.randrange(20, 32767), -rng.randrange(1, 32768)])
    elif op == "retype":  # what the codec finds under a known id is of another type
        field[1] = rng.choice([t for t in (*_SCALARS, STRUCT, LIST, MAP) if t != field[1]])
        field[2] = random_value(rng, field[1])
    elif op == "value" and field[1] in (*_SCALARS,):
        field[2] = random_value(rng, field[1])
    elif op == "rename":
        return rng.choice(["NoSuchCall", "GetLog", "", "x" * 300, "Open\u00e9Session"])
    return name


# ----------------------------------------------------------------- byte mutations


def mutate_bytes(rng: random.Random, data: bytes, marks: list) -> bytes:
    """One byte-level change: the result may not decode at all."""
    buf = bytearray(data)
    op = rng.choice(["flip", "flip", "truncate", "huge", "huge", "type", "insert",
                     "random", "duplicate"])
    if op == "flip" and buf:
        for _ in range(rng.randrange(1, 9)):
            buf[rng.randrange(len(buf))] ^= rng.randrange(1, 256)
    elif op == "truncate" and buf:
        del buf[rng.randrange(len(buf)):]
    elif op == "huge":  # a length (of a name, string, list) or any 4 bytes: 2 GB
        lens = [o for kind, o in marks if kind == "len"]
        at = rng.choice(lens) if lens and rng.random() < 0.8 else rng.randrange(max(1, len(buf)))
        buf[at:at + 4] = struct.pack(">I", rng.choice(HUGE))
    elif op == "type":  # a field's type id: an unknown one, or another known
        types = [o for kind, o in marks if kind == "type"]
        if types:
            buf[rng.choice(types)] = rng.choice([0, 1, 5, 7, 9, 16, 17, 255, *_SCALARS, LIST])
    elif op == "insert":
        at = rng.randrange(len(buf) + 1)
        buf[at:at] = rng.randbytes(rng.randrange(1, 16))
    elif op == "random":
        return rng.randbytes(rng.randrange(1, 300))
    elif op == "duplicate" and buf:
        at = rng.randrange(len(buf))
        buf[at:at] = buf[at:at + rng.randrange(1, 64)]
    return bytes(buf)


def nested(rng: random.Random, name: str) -> bytes:
    """A call whose request nests structs past any depth a codec can recurse (in a
    field the server decodes, or in one it skips)."""
    depth = rng.choice([65, 1000, 100_000])
    fid = rng.choice([b"\x00\x01", b"\x00\x63"])
    head = write_message(name, 7, [])[:-1]  # the head, without the empty struct's end
    return head + b"\x0c\x00\x01" + (b"\x0c" + fid) * depth + b"\x00" * (depth + 2)


# ----------------------------------------------------------------- SASL PLAIN


def sasl_message(status: int, payload: bytes) -> bytes:
    return bytes([status]) + struct.pack(">I", len(payload)) + payload


HANDSHAKE = sasl_message(1, b"PLAIN") + sasl_message(2, b"\0fuzz\0pw")


def sasl_garbage(rng: random.Random) -> bytes:
    """A handshake gone wrong: a bad status, a 2 GB or absurd length, a bad mechanism or
    PLAIN response, or cut short."""
    return rng.choice([
        sasl_message(rng.choice([0, 2, 3, 4, 5, 6, 255]), b"PLAIN") + HANDSHAKE[10:],
        bytes([1]) + struct.pack(">I", rng.choice(HUGE)) + b"PLAIN",
        sasl_message(1, b"GSSAPI") + HANDSHAKE[10:],
        sasl_message(1, rng.randbytes(rng.randrange(30))),
        sasl_message(1, b"PLAIN") + sasl_message(2, b"no-nul-bytes"),
        sasl_message(1, b"PLAIN") + sasl_message(rng.choice([0, 1, 3, 9]), b"\0a\0b"),
        HANDSHAKE[:rng.randrange(len(HANDSHAKE))],
        rng.randbytes(rng.randrange(1, 64)),
    ])


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload
