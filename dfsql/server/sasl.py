"""The server side of Hive's SASL transport, PLAIN mechanism only (what beeline, JDBC
tools, PyHive and impyla speak for user/password or no authentication).

Negotiation (Thrift's TSaslTransport): every message is a status byte, a 4-byte
big-endian length and a payload. The client sends START with the mechanism name, then
OK with PLAIN's response ``authzid NUL user NUL password``; the server answers COMPLETE,
or BAD / ERROR with a message. Without a security layer the connection then carries
Thrift messages in 4-byte length frames: Thrift's framed transport
(:class:`dfsql.server.transport.Framed`, which checks each frame's size first).

The authorization id (PLAIN's first field) may be empty or the user's own name: dfsql
does not let one user act as another (Hive's impersonation, ``hive.server2.proxy.user``),
so any other id is refused rather than ignored. A check may also refuse without
looking at the password (:class:`dfsql.server.logins.LoginRefused`: too many failures).
"""

from __future__ import annotations

import struct
from collections.abc import Callable

from dfsql.server.logins import LoginRefused

START, OK, BAD, ERROR, COMPLETE = 1, 2, 3, 4, 5
#: a negotiation message larger than this is not PLAIN's (a client speaking something else)
MAX_NEGOTIATION = 64 * 1024


class AuthenticationError(Exception):
    """The client's credentials were refused (the connection is closed)."""


def _read_message(trans) -> tuple[int, bytes]:
    header = trans.readAll(5)
    status, length = header[0], struct.unpack(">I", header[1:])[0]
    if length > MAX_NEGOTIATION:
        raise AuthenticationError(f"SASL message of {length} bytes: not a SASL client")
    return status, trans.readAll(length) if length else b""


def _send(trans, status: int, payload: bytes = b"") -> None:
    trans.write(bytes([status]) + struct.pack(">I", len(payload)) + payload)
    trans.flush()


def negotiate(trans, check: Callable[[str, str], bool],
              admit: Callable[[str], str | None] | None = None) -> str:
    """Run PLAIN over a connected socket transport; the authenticated user's name.
    ``check(user, password)`` decides; a refusal is sent to the client and raised.
    ``admit(user)``, once the credentials hold, says why the user may not connect now
    (a per-user limit), or None: the client gets that reason as SASL's BAD message."""
    status, mechanism = _read_message(trans)
    if status != START:
        raise AuthenticationError(f"expected SASL START, got status {status}")
    if mechanism.decode("ascii", "replace").upper() != "PLAIN":
        # a client's bytes go into the log line cut short (one line, not 64 kB of it)
        _send(trans, BAD, b"Unsupported mechanism type " + mechanism[:64])
        raise AuthenticationError(f"unsupported SASL mechanism {mechanism[:64]!r}")
    status, response = _read_message(trans)
    if status not in (OK, COMPLETE):
        raise AuthenticationError(f"expected SASL OK, got status {status}")
    parts = response.split(b"\0")
    if len(parts) != 3:
        _send(trans, BAD, b"Malformed PLAIN response")
        raise AuthenticationError("malformed PLAIN response")
    authzid = parts[0].decode("utf-8", "replace")
    user, password = parts[1].decode("utf-8", "replace"), parts[2].decode("utf-8", "replace")
    if authzid and authzid != user:
        _send(trans, BAD, b"Authorization id differs from the user: impersonation is not "
                          b"supported")
        raise AuthenticationError(f"user {user[:64]!r} asked to act as {authzid[:64]!r}")
    try:
        ok = check(user, password)
    except LoginRefused as e:
        _send(trans, BAD, str(e).encode())
        raise AuthenticationError(str(e)) from None
    if not ok:
        _send(trans, BAD, b"Error validating the login")
        raise AuthenticationError(f"bad credentials for user {user[:64]!r}")
    why = admit(user) if admit is not None else None
    if why:
        _send(trans, BAD, why.encode("utf-8", "replace"))
        raise AuthenticationError(why)
    _send(trans, COMPLETE)
    return user
