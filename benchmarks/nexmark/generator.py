"""Nexmark's events (people, auctions, bids) for dfsql's benchmarks, drawn with numpy.

The rules are Nexmark's own (nexmark/nexmark's ``NexmarkGenerator``, ``PersonGenerator``,
``AuctionGenerator``, ``BidGenerator``, ``PriceGenerator``, ``StringsGenerator``; Beam's
copy under sdks/java/testing/nexmark/…/sources/generator/ agrees, but for the bid's
``channel`` and ``url``, which only nexmark/nexmark has, and the bidder below):

* event ``e`` (its id) is a person when ``e % 50 < 1``, an auction when ``< 4``, else a bid;
  its event time is ``base + e * 1e6 / rate`` µs (base 2015-07-15T00:00:00Z, Beam's);
* person and auction ids count up from 1000 (``lastBase0PersonId``/``AuctionId``); a bid
  names a hot auction (the first of its batch of 100) with probability ``1 - 1/2``, else
  one of the last 100 auctions or the next 10; a hot bidder (the second of its batch of 100
  people) with ``1 - 1/4``, else one of the last 1000 people or the next 10; an auction a
  hot seller (the first of the batch) with ``1 - 1/4``, else drawn as a bidder is;
* prices ``round(100 * 10 ** (6u))``, u uniform in [0, 1): log-uniform over [100, 1e8];
  reserve = initial bid + another price; categories 10 .. 14; an auction ``expires`` after
  ``1 + nextLong(2 * horizon)`` ms, the horizon being the event time 1666 events (100
  in-flight auctions' worth) ahead; names, cities, states and the channels/URLs from the
  generators' lists; ``extra`` padding each event to 200 / 500 / 100 bytes on average;
* out-of-order groups: the ``k``-th emitted event carries the id and time of event
  ``(k // g) * g + (k * 953) % g`` (``nextAdjustedEventNumber``; g = 1: in order).

Where this differs from Nexmark, and why:

* The draws are numpy's PCG64, not Java's ``SplittableRandom`` (Nexmark) or ``Random``
  seeded by event id (Beam): values differ, distributions match. Each field has its own
  stream per seed and block of :data:`BLOCK_EVENTS` events, so a run's first N events
  are the same whatever follows them, and one seed always gives the same rows.
* Event times are kept in µs (100 µs apart at 10,000 events/s) where Nexmark truncates
  each to ms; auction lengths are whole ms, as Nexmark's are.
* ``bid.bidder``: Nexmark's Flink copy adds FIRST_PERSON_ID twice (a bid names the person
  1000 ids after the one drawn, often nobody yet); Beam's adds it once, as here, so a bid's
  bidder is the person the rules chose.
* ``extra``: Nexmark cuts each from a random offset of one 1 MiB random string; here a
  batch's extras are consecutive pieces of that string, so they cost one copy.
* The 10,000 channel URLs and four hot URLs are drawn once per seed (Nexmark: once per
  JVM, unseeded).
* ``arrival_time`` is processing time, simulated: Nexmark's emission clock is the run's
  wall clock. The k-th emitted event arrives at the event time of slot ``k + g - 1`` (a
  group arrives once its last event has happened, so nothing arrives before its own event
  time), plus, as Beam's ``UnboundedEventSource`` holds events back, with probability
  ``prob_delayed_event`` (0.1) a delay of ``1 + nextLong(occasionalDelaySec * 1000)`` ms
  (1 ms .. 3 s). Beam delays only when rate-limited; here always (0 turns it off).
* One generator (``numEventGenerators`` 1) at a constant rate (Nexmark's default shape,
  first rate = next rate). A last partial out-of-order group keeps Nexmark's formula, which
  can repeat ids there: give a multiple of the group size for a clean permutation.

On disk (:func:`write`): ``DIR/person``, ``DIR/auction``, ``DIR/bid``, each a directory of
``part-NNNNNN.parquet``. File ``c`` holds the rows arriving in ``[base + c * F,
base + (c + 1) * F)`` µs (``F`` = ``file_seconds``), sorted by ``arrival_time`` then
``date_time``; files are written in that order and their names sort in it, so a file
stream reading them in order reads each stream in arrival order. No file for an empty
span. Timestamps are Parquet ``timestamp[us, UTC]`` (Spark: TIMESTAMP), ids int64.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from benchmarks.nexmark import strings
from benchmarks.nexmark.config import (
    AUCTION_ID_LEAD,
    FIRST_AUCTION_ID,
    FIRST_CATEGORY_ID,
    FIRST_NAMES,
    FIRST_PERSON_ID,
    HOT_BATCH,
    HOT_CHANNELS,
    HOT_CHANNELS_RATIO,
    LAST_NAMES,
    NUM_CATEGORIES,
    PERSON_ID_LEAD,
    US_CITIES,
    US_STATES,
    NexmarkConfig,
)

#: Events per block: the unit of the random streams (and of memory while writing).
BLOCK_EVENTS = 1_000_000
KINDS = ("person", "auction", "bid")
_TS = pa.timestamp("us", tz="UTC")
SCHEMAS = {
    "person": pa.schema([("id", pa.int64()), ("name", pa.string()),
                         ("email_address", pa.string()), ("credit_card", pa.string()),
                         ("city", pa.string()), ("state", pa.string()), ("date_time", _TS),
                         ("extra", pa.string()), ("arrival_time", _TS)]),
    "auction": pa.schema([("id", pa.int64()), ("item_name", pa.string()),
                          ("description", pa.string()), ("initial_bid", pa.int64()),
                          ("reserve", pa.int64()), ("date_time", _TS), ("expires", _TS),
                          ("seller", pa.int64()), ("category", pa.int64()),
                          ("extra", pa.string()), ("arrival_time", _TS)]),
    "bid": pa.schema([("auction", pa.int64()), ("bidder", pa.int64()), ("price", pa.int64()),
                      ("channel", pa.string()), ("url", pa.string()), ("date_time", _TS),
                      ("extra", pa.string()), ("arrival_time", _TS)]),
}


class Streams:
    """Independent random streams named by field, for one key (seed, block, …): a field's
    draws do not shift when another field draws more or less."""

    def __init__(self, seed: int, *key: int) -> None:
        if seed < 0:
            raise ValueError("the seed must be >= 0")
        self._key = (seed, *key)

    def __call__(self, field: str) -> np.random.Generator:
        entropy = [*self._key, zlib.crc32(field.encode())]
        return np.random.Generator(np.random.PCG64(np.random.SeedSequence(entropy)))


@dataclass(frozen=True)
class _Lists:
    """What Nexmark draws once per JVM: the reusable extra string, the channels' URLs; and
    its fixed lists as Arrow arrays to take from."""

    reusable: np.ndarray
    channels: pa.Array
    urls: pa.Array
    names: pa.Array
    cities: pa.Array
    states: pa.Array


def _lists(seed: int) -> _Lists:
    draw = Streams(seed, 0)
    channels, urls = strings.channels(draw)
    names = pa.array([f"{f} {la}" for f in FIRST_NAMES for la in LAST_NAMES])
    return _Lists(strings.reusable_extra(draw("reusable")), channels, urls, names,
                  pa.array(US_CITIES), pa.array(US_STATES))


def _price(draw: np.random.Generator, rows: int) -> np.ndarray:
    """PriceGenerator.nextPrice: ``Math.round(10 ** (6u) * 100)``."""
    return np.floor(10.0 ** (draw.random(rows) * 6.0) * 100.0 + 0.5).astype(np.int64)


def _lengths(*arrays: pa.Array) -> np.ndarray:
    return sum(pc.binary_length(a).to_numpy().astype(np.int64) for a in arrays)


def _ts(us: np.ndarray) -> pa.Array:
    return pa.array(us, pa.int64()).cast(_TS)


def _person_id(c: NexmarkConfig, draw: np.random.Generator, eid: np.ndarray) -> np.ndarray:
    """PersonGenerator.nextBase0PersonId: one of the last ``num_active_people`` or the next
    PERSON_ID_LEAD."""
    people = c.last_base0_person_id(eid) + 1
    active = np.minimum(people, c.num_active_people)
    return people - active + draw.integers(0, active + PERSON_ID_LEAD)


def _auction_id(c: NexmarkConfig, draw: np.random.Generator, eid: np.ndarray) -> np.ndarray:
    """AuctionGenerator.nextBase0AuctionId: one of the last ``num_in_flight_auctions`` or
    the next AUCTION_ID_LEAD."""
    last = c.last_base0_auction_id(eid)
    low = np.maximum(last - c.num_in_flight_auctions, 0)
    return low + draw.integers(0, last - low + 1 + AUCTION_ID_LEAD)


def _hot(draw: np.random.Generator, ratio: int, rows: int) -> np.ndarray:
    """``random.nextInt(ratio) > 0``: hot with probability 1 - 1/ratio."""
    return draw.integers(0, ratio, rows) > 0


def _people(c: NexmarkConfig, draw: Streams, lists: _Lists, eid: np.ndarray,
            times: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    """PersonGenerator.nextPerson for the person events ``eid``."""
    k = len(eid)
    name = lists.names.take(draw("person.first").integers(0, len(FIRST_NAMES), k)
                            * len(LAST_NAMES)
                            + draw("person.last").integers(0, len(LAST_NAMES), k))
    email = pc.binary_join_element_wise(
        strings.next_string(draw("person.email_len"), draw("person.email_chars"), k, 7), "@",
        strings.next_string(draw("person.domain_len"), draw("person.domain_chars"), k, 5),
        ".com", "")
    card = strings.credit_card(draw("person.credit_card"), k)
    city = lists.cities.take(draw("person.city").integers(0, len(US_CITIES), k))
    state = lists.states.take(draw("person.state").integers(0, len(US_STATES), k))
    size = 8 + _lengths(name, email, card, city, state)
    extra = strings.next_extra(draw("person.extra_len"), draw("person.extra_at"),
                               lists.reusable, size, c.avg_person_byte_size)
    ids = c.last_base0_person_id(eid) + FIRST_PERSON_ID
    return pa.Table.from_arrays([pa.array(ids), name, email, card, city, state,
                                 _ts(times[0]), extra, _ts(times[1])],
                                schema=SCHEMAS["person"])


def _auctions(c: NexmarkConfig, draw: Streams, lists: _Lists, eid: np.ndarray,
              times: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    """AuctionGenerator.nextAuction for the auction events ``eid``."""
    k = len(eid)
    hot_seller = (c.last_base0_person_id(eid) // HOT_BATCH) * HOT_BATCH
    seller = FIRST_PERSON_ID + np.where(_hot(draw("auction.hot"), c.hot_sellers_ratio, k),
                                        hot_seller, _person_id(c, draw("auction.seller"), eid))
    category = FIRST_CATEGORY_ID + draw("auction.category").integers(0, NUM_CATEGORIES, k)
    initial_bid = _price(draw("auction.initial_bid"), k)
    reserve = initial_bid + _price(draw("auction.reserve"), k)
    # nextAuctionLengthMs: mean length = the time until num_in_flight_auctions more auctions
    ahead = (c.num_in_flight_auctions * c.total_proportion) // c.auction_proportion
    horizon_ms = (c.timestamp_us(eid + ahead) - times[0]) // 1000
    length_ms = 1 + draw("auction.length").integers(0, np.maximum(2 * horizon_ms, 1))
    item = strings.next_string(draw("auction.name_len"), draw("auction.name_chars"), k, 20)
    desc = strings.next_string(draw("auction.desc_len"), draw("auction.desc_chars"), k, 100)
    size = 8 + _lengths(item, desc) + 8 * 5
    extra = strings.next_extra(draw("auction.extra_len"), draw("auction.extra_at"),
                               lists.reusable, size, c.avg_auction_byte_size)
    ids = c.last_base0_auction_id(eid) + FIRST_AUCTION_ID
    return pa.Table.from_arrays(
        [pa.array(ids), item, desc, pa.array(initial_bid), pa.array(reserve), _ts(times[0]),
         _ts(times[0] + length_ms * 1000), pa.array(seller), pa.array(category), extra,
         _ts(times[1])], schema=SCHEMAS["auction"])


def _bids(c: NexmarkConfig, draw: Streams, lists: _Lists, eid: np.ndarray,
          times: tuple[np.ndarray, np.ndarray]) -> pa.Table:
    """BidGenerator.nextBid for the bid events ``eid``."""
    k = len(eid)
    hot_auction = (c.last_base0_auction_id(eid) // HOT_BATCH) * HOT_BATCH
    auction = FIRST_AUCTION_ID + np.where(_hot(draw("bid.hot_auction"), c.hot_auction_ratio, k),
                                          hot_auction, _auction_id(c, draw("bid.auction"), eid))
    hot_bidder = (c.last_base0_person_id(eid) // HOT_BATCH) * HOT_BATCH + 1
    bidder = FIRST_PERSON_ID + np.where(_hot(draw("bid.hot_bidder"), c.hot_bidders_ratio, k),
                                        hot_bidder, _person_id(c, draw("bid.bidder"), eid))
    price = _price(draw("bid.price"), k)
    # one of the 4 hot channels (with P 1 - 1/HOT_CHANNELS_RATIO), else of the 10,000
    hot = _hot(draw("bid.hot_channel"), HOT_CHANNELS_RATIO, k)
    which = np.where(hot, draw("bid.hot_channel_index").integers(0, len(HOT_CHANNELS), k),
                     len(HOT_CHANNELS) + draw("bid.channel_index").integers(
                         0, len(lists.channels) - len(HOT_CHANNELS), k))
    extra = strings.next_extra(draw("bid.extra_len"), draw("bid.extra_at"), lists.reusable,
                               np.full(k, 8 * 4), c.avg_bid_byte_size)
    return pa.Table.from_arrays(
        [pa.array(auction), pa.array(bidder), pa.array(price), lists.channels.take(which),
         lists.urls.take(which), _ts(times[0]), extra, _ts(times[1])], schema=SCHEMAS["bid"])


def _block(c: NexmarkConfig, seed: int, lists: _Lists, block: int,
           stop: int) -> dict[str, pa.Table]:
    """The events emitted at positions ``[block * BLOCK_EVENTS, stop)``, per kind, in
    emission order."""
    draw = Streams(seed, 1, block)
    emitted = np.arange(block * BLOCK_EVENTS, stop, dtype=np.int64)
    eid = c.adjusted_event_number(emitted)
    date_time = c.timestamp_us(eid)
    delayed = draw("delayed").random(len(emitted)) < c.prob_delayed_event
    delay_ms = 1 + draw("delay").integers(0, max(c.occasional_delay_sec * 1000, 1),
                                          len(emitted))
    arrival = (c.timestamp_us(emitted + c.out_of_order_group_size - 1)
               + np.where(delayed, delay_ms * 1000, 0))
    offset = eid % c.total_proportion
    pp, ap = c.person_proportion, c.auction_proportion
    masks = {"person": offset < pp, "auction": (offset >= pp) & (offset < pp + ap),
             "bid": offset >= pp + ap}
    build = {"person": _people, "auction": _auctions, "bid": _bids}
    return {kind: build[kind](c, draw, lists, eid[m], (date_time[m], arrival[m]))
            for kind, m in masks.items()}


def _blocks(events: int, seed: int, c: NexmarkConfig) -> Iterator[tuple[int, dict]]:
    """(the end of the block, its tables) for each block of ``events`` events."""
    if events < 0:
        raise ValueError("events must be >= 0")
    lists = _lists(seed)
    for block in range(-(-events // BLOCK_EVENTS)):
        stop = min((block + 1) * BLOCK_EVENTS, events)
        yield stop, _block(c, seed, lists, block, stop)


def _micros(table: pa.Table, column: str) -> np.ndarray:
    return table.column(column).cast(pa.int64()).to_numpy()


def _in_arrival_order(table: pa.Table) -> pa.Table:
    """By ``arrival_time``, then ``date_time`` (numpy's lexsort: a third of Arrow's
    ``sort_by`` time here)."""
    order = np.lexsort((_micros(table, "date_time"), _micros(table, "arrival_time")))
    return table.combine_chunks().take(order)  # a chunked take concatenates per column


def generate(events: int, seed: int = 1, rate: int = 10_000,
             **knobs: object) -> dict[str, pa.Table]:
    """The ``person``, ``auction`` and ``bid`` tables of ``events`` Nexmark events, each in
    arrival order; ``knobs`` are further :class:`NexmarkConfig` fields."""
    c = NexmarkConfig(rate=rate, **knobs)  # type: ignore[arg-type]
    parts: dict[str, list[pa.Table]] = {kind: [] for kind in KINDS}
    for _, tables in _blocks(events, seed, c):
        for kind in KINDS:
            parts[kind].append(tables[kind])
    return {kind: _in_arrival_order(pa.concat_tables(parts[kind]) if parts[kind]
                                    else SCHEMAS[kind].empty_table()) for kind in KINDS}


def write(out: str | Path, events: int, seed: int = 1, rate: int = 10_000,
          file_seconds: float = 10.0, **knobs: object) -> dict[str, int]:
    """Writes the three streams under ``out`` (see the module's docstring for the layout),
    a block at a time; returns the rows written per kind."""
    c = NexmarkConfig(rate=rate, **knobs)  # type: ignore[arg-type]
    span_us = round(file_seconds * 1_000_000)
    if span_us <= 0:
        raise ValueError("file_seconds must be positive")
    dirs = {kind: Path(out) / kind for kind in KINDS}
    for d in dirs.values():
        if d.is_dir() and any(d.glob("*.parquet")):
            raise FileExistsError(f"{d} already holds Parquet files")
        d.mkdir(parents=True, exist_ok=True)
    held = {kind: SCHEMAS[kind].empty_table() for kind in KINDS}
    rows = dict.fromkeys(KINDS, 0)
    for stop, tables in _blocks(events, seed, c):
        # every later event arrives at or after the event time of slot ``stop``
        done = ((c.timestamp_us(np.int64(stop)) - c.base_time_us) // span_us
                if stop < events else None)
        for kind in KINDS:
            table = _in_arrival_order(pa.concat_tables([held[kind], tables[kind]]))
            held[kind] = _write_spans(table, dirs[kind], c.base_time_us, span_us, done)
            rows[kind] += len(tables[kind])
    return rows


def _write_spans(table: pa.Table, folder: Path, base_us: int, span_us: int,
                 done: int | None) -> pa.Table:
    """Writes a file per span of arrival time before span ``done`` (all when None);
    returns the rows of the later spans, which later blocks add to."""
    arrival = _micros(table, "arrival_time")
    span = (arrival - base_us) // span_us
    cut = len(span) if done is None else int(np.searchsorted(span, done))
    starts = np.flatnonzero(np.diff(span[:cut], prepend=-1))
    for a, b in zip(starts, [*starts[1:], cut], strict=True):
        pq.write_table(table.slice(a, b - a), folder / f"part-{span[a]:06d}.parquet")
    return table.slice(cut)
