"""Nexmark's string fields drawn for many events at once (StringsGenerator, the person's
email and credit card, BidGenerator's channels and URLs).

Each function takes numpy ``Generator`` streams and a row count and returns a pyarrow
string array: characters are drawn as one uint8 buffer and cut by the lengths' offsets, so
no Python code runs per row.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from benchmarks.nexmark.config import CHANNELS_NUMBER, HOT_CHANNELS

#: A named, independent random stream (see generator.Streams).
Draw = Callable[[str], np.random.Generator]

#: StringsGenerator.MIN_STRING_LENGTH
MIN_STRING_LENGTH = 3
#: StringsGenerator.REUSABLE_EXTRA_STRING's length: extras are cut from one such string.
REUSABLE_LENGTH = 1024 * 1024
#: nextString: P(special character) = 1/13, else one of 26 letters: one draw in [0, 13 * 26)
#: is the special character below 26 and letter ``x % 26`` above (12 * 26 values, uniform).
_SPECIAL_BELOW, _DRAW_SPAN = 26, 13 * 26


def string_array(lengths: np.ndarray, data: np.ndarray) -> pa.StringArray:
    """Consecutive pieces of ``data`` (ASCII bytes), ``lengths[i]`` bytes for row ``i``."""
    offsets = np.zeros(len(lengths) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(len(lengths), pa.py_buffer(offsets),
                                       pa.py_buffer(np.ascontiguousarray(data, np.uint8)))


def next_string(lengths: np.random.Generator, chars: np.random.Generator, rows: int,
                max_length: int, special: str = " ") -> pa.StringArray:
    """StringsGenerator.nextString: ``3 + nextInt(max_length - 3)`` characters, each the
    special one with probability 1/13, else a lowercase letter; then Java's ``trim()``
    (spaces at either end go; another special character stays)."""
    n = MIN_STRING_LENGTH + lengths.integers(0, max_length - MIN_STRING_LENGTH, rows)
    x = chars.integers(0, _DRAW_SPAN, int(n.sum()), dtype=np.uint16)
    data = np.where(x < _SPECIAL_BELOW, ord(special), ord("a") + x % 26)
    out = string_array(n, data)
    return pc.ascii_trim(out, " ") if special == " " else out


def reusable_extra(chars: np.random.Generator) -> np.ndarray:
    """StringsGenerator.REUSABLE_EXTRA_STRING as bytes: nextExactString's characters,
    ``'a' + rnd % 26`` for six base-26 digits of each ``nextInt()``. Java's ``%`` and ``/``
    keep a negative int's sign, so the alphabet is ``'H'`` .. ``'z'``, as Nexmark's is."""
    rnd = chars.integers(-2**31, 2**31, -(-REUSABLE_LENGTH // 6), dtype=np.int64)
    digits = np.empty((len(rnd), 6), dtype=np.int64)
    for j in range(6):  # six digits of every int at once
        digits[:, j] = np.fmod(rnd, 26)
        rnd = (rnd - digits[:, j]) // 26  # truncation toward zero, as Java's int division
    return (ord("a") + digits.reshape(-1)[:REUSABLE_LENGTH]).astype(np.uint8)


def next_extra(sizes: np.random.Generator, start: np.random.Generator, reusable: np.ndarray,
               current_size: np.ndarray, average: int) -> pa.StringArray:
    """StringsGenerator.nextExtra: padding so that ``current_size + len(extra)`` averages
    ``average``: ``d = average - current_size``, ``delta = round(d / 5)``, a length uniform
    in ``[d - delta, d + delta)``; empty when the fields are already larger. Nexmark cuts
    each extra at a random offset of the reusable string; here a batch's extras are
    consecutive pieces of it (cycled) from one random offset, so they cost one copy."""
    d = average - current_size
    delta = np.floor(d * 0.2 + 0.5).astype(np.int64)  # Java's Math.round (d >= 0 here)
    spread = sizes.integers(0, np.maximum(2 * delta, 1))
    n = np.where(current_size > average, 0, d - delta + np.where(delta > 0, spread, 0))
    total, offset = int(n.sum()), int(start.integers(0, len(reusable)))
    data = np.tile(reusable, -(-(offset + total) // len(reusable)))[offset:offset + total]
    return string_array(n, data)


def credit_card(groups: np.random.Generator, rows: int) -> pa.StringArray:
    """PersonGenerator.nextCreditCard: four ``%04d`` numbers below 10000 joined by spaces
    (19 characters)."""
    g = groups.integers(0, 10_000, (rows, 4))
    digits = (g[:, :, None] // np.array([1000, 100, 10, 1])) % 10  # (rows, 4, 4)
    cells = np.full((rows, 4, 5), ord(" "), dtype=np.uint8)
    cells[:, :, :4] = ord("0") + digits
    return string_array(np.full(rows, 19), cells.reshape(rows, 20)[:, :19].reshape(-1))


def _base_url(draw: Draw, rows: int) -> pa.Array:
    """BidGenerator.getBaseUrl: three ``nextString(5, '_')`` path parts."""
    parts = [next_string(draw(f"url_len{i}"), draw(f"url_chars{i}"), rows, 5, "_")
             for i in range(3)]
    return pc.binary_join_element_wise("https://www.nexmark.com/", parts[0], "/", parts[1],
                                       "/", parts[2], "/item.htm?query=1", "")


def java_abs_reverse(i: np.ndarray) -> np.ndarray:
    """``Math.abs(Integer.reverse(i))`` (Java's ``abs`` of ``Integer.MIN_VALUE`` is itself:
    channel 1's id is -2147483648 in Nexmark too)."""
    bits = np.unpackbits(i.astype(">u4").view(np.uint8).reshape(-1, 4), axis=1)
    reversed_ = np.packbits(bits[:, ::-1], axis=1).reshape(-1).view(">u4")
    with np.errstate(over="ignore"):
        return np.abs(reversed_.astype(np.uint32).view(np.int32))


def channels(draw: Draw) -> tuple[pa.Array, pa.Array]:
    """BidGenerator's channels and URLs: the four HOT_CHANNELS with HOT_URLS, then
    CHANNEL_URL_CACHE's ``channel-i`` with a base URL, nine in ten with ``&channel_id=``
    ``abs(reverse(i))``. Nexmark draws them once per JVM from an unseeded random; here
    once per seed. Returned as (channel, url) of length 4 + CHANNELS_NUMBER."""
    i = np.arange(CHANNELS_NUMBER, dtype=np.int64)
    urls = _base_url(draw, len(HOT_CHANNELS) + CHANNELS_NUMBER)
    hot_urls, cache_urls = urls.slice(0, len(HOT_CHANNELS)), urls.slice(len(HOT_CHANNELS))
    channel_id = pc.cast(pa.array(java_abs_reverse(i)), pa.string())
    with_id = pa.array(draw("channel_id").integers(0, 10, CHANNELS_NUMBER) > 0)
    cache_urls = pc.if_else(with_id, pc.binary_join_element_wise(
        cache_urls, "&channel_id=", channel_id, ""), cache_urls)
    names = pc.binary_join_element_wise("channel-", pc.cast(pa.array(i), pa.string()), "")
    return (pa.concat_arrays([pa.array(HOT_CHANNELS), names]),
            pa.concat_arrays([hot_urls, cache_urls]))
