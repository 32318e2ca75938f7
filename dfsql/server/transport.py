"""Reading what a client sends, within a bound: the endpoint's two Thrift transports.

Thrift's own buffered and framed transports read whatever size they are told: a frame
header, or a string's length handed to their refill by the C codec (which, for binary
fields, asks before it checks its own limit), of 2 GB has them ask the socket for 2 GB
at once, and Python sets that much aside before a byte arrives. These refuse any single
read of more than ``max_message`` bytes before reading, and take from the socket at most
:data:`CHUNK` bytes at a time, so that memory follows what a client actually sent, not
what it announced. (The HTTP transport reads a request's body the same way:
:func:`gather`.)
"""

from __future__ import annotations

import struct
from io import BytesIO

from thrift.transport import TTransport

__all__ = ["Buffered", "Framed", "gather"]

#: the most asked of the socket in one read
CHUNK = 256 * 1024

_TTE = TTransport.TTransportException


def _over(size: int, limit: int, what: str) -> _TTE:
    return _TTE(_TTE.SIZE_LIMIT if size > limit else _TTE.NEGATIVE_SIZE,
                f"{what} of {size} bytes announced; the limit is {limit} (--max-message-mb)")


class _OnTransport(TTransport.TTransportBase, TTransport.CReadableTransport):
    """A transport over another one (the socket's): opening and closing pass through;
    reads come from a buffer, writes go to one."""

    def __init__(self, trans) -> None:
        self._trans = trans
        self._rbuf, self._wbuf = BytesIO(b""), BytesIO()

    def isOpen(self) -> bool:  # noqa: N802 (Thrift's names)
        return self._trans.isOpen()

    def open(self) -> None:
        self._trans.open()

    def close(self) -> None:
        self._trans.close()


class Buffered(_OnTransport):
    """A read buffer (and a write buffer) on the socket's transport, as Thrift's
    TBufferedTransport, refusing any one read over ``max_message`` bytes."""

    def __init__(self, trans, max_message: int, size: int = 4096) -> None:
        super().__init__(trans)
        self.max_message, self._size = max_message, size

    def read(self, sz: int) -> bytes:
        got = self._rbuf.read(sz)
        if got:
            return got
        self._rbuf = BytesIO(self._trans.read(min(max(sz, self._size), CHUNK)))
        return self._rbuf.read(sz)

    def readAll(self, sz: int) -> bytes:  # noqa: N802
        if not 0 <= sz <= self.max_message:
            raise _over(sz, self.max_message, "a read")
        return gather(self.read, b"", sz)

    def pending(self) -> bool:
        """Whether read bytes wait in the buffer."""
        return self._rbuf.tell() != len(self._rbuf.getbuffer())

    def push_back(self, data: bytes) -> None:
        """Bytes read past the buffer (with nothing buffered) go back into it."""
        self._rbuf = BytesIO(data)

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        out = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        self._trans.write(out)
        self._trans.flush()

    # the C codec's interface (CReadableTransport): it decodes straight from the buffer
    @property
    def cstringio_buf(self) -> BytesIO:
        return self._rbuf

    def cstringio_refill(self, partial: bytes, reqlen: int) -> BytesIO:
        if reqlen - len(partial) > self.max_message:
            raise _over(reqlen, self.max_message, "a value")
        self._rbuf = BytesIO(gather(
            lambda n: self._trans.read(min(max(n, self._size), CHUNK)), partial, reqlen))
        return self._rbuf


class Framed(_OnTransport):
    """Thrift's framed transport (SASL's data phase), refusing a frame over
    ``max_frame`` bytes at its 4-byte header: a client announcing 2 GB is disconnected
    with nothing set aside."""

    def __init__(self, trans, max_frame: int) -> None:
        super().__init__(trans)
        self.max_frame = max_frame

    def read(self, sz: int) -> bytes:
        got = self._rbuf.read(sz)
        while not got and sz > 0:  # an empty frame is allowed (Thrift's empty flush)
            self._read_frame()
            got = self._rbuf.read(sz)
        return got

    def readAll(self, sz: int) -> bytes:  # noqa: N802
        if not 0 <= sz <= self.max_frame:
            raise _over(sz, self.max_frame, "a read")
        return gather(self.read, b"", sz)

    def _read_frame(self) -> None:
        size = struct.unpack(">i", self._trans.readAll(4))[0]
        if not 0 <= size <= self.max_frame:
            raise _over(size, self.max_frame, "a frame")
        self._rbuf = BytesIO(gather(self._trans.read, b"", size))

    def write(self, buf: bytes) -> None:
        self._wbuf.write(buf)

    def flush(self) -> None:
        out = self._wbuf.getvalue()
        self._wbuf = BytesIO()
        self._trans.write(struct.pack(">i", len(out)) + out)
        self._trans.flush()

    @property
    def cstringio_buf(self) -> BytesIO:
        return self._rbuf

    def cstringio_refill(self, partial: bytes, reqlen: int) -> BytesIO:
        # a value spanning frames (the codec asks once the buffer is used up)
        if reqlen - len(partial) > self.max_frame:
            raise _over(reqlen, self.max_frame, "a value")
        parts, have = [partial], len(partial)
        while have < reqlen:
            self._read_frame()
            parts.append(self._rbuf.getvalue())
            have += len(parts[-1])
        self._rbuf = BytesIO(b"".join(parts))
        return self._rbuf


def gather(read, first: bytes, size: int) -> bytes:
    """``first`` and then reads until ``size`` bytes, joined once (Thrift's readAll
    copies all it has so far per chunk); a read of nothing is the client gone."""
    parts, have = [first], len(first)
    while have < size:
        part = read(size - have)
        if not part:
            raise _TTE(_TTE.END_OF_FILE, "the client closed the connection mid-message")
        parts.append(part)
        have += len(part)
    return b"".join(parts)
