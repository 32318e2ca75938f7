"""The Nexmark generator (benchmarks/nexmark/) against Nexmark's own rules, read from
nexmark/nexmark's Java generators (NexmarkGenerator, PersonGenerator, AuctionGenerator,
BidGenerator, PriceGenerator, StringsGenerator, GeneratorConfig) with their defaults.

Expected values are derived here from those rules, not from the generator: event ids are
recovered from ``date_time`` (100 µs apart at 10,000 events/s), the newest auction and
person at each bid from the other tables' times (``searchsorted``), shares from the
rules' probabilities with a bound of five standard errors. No Spark here: the command
and Spark's reading of its files are tests/bench/test_nexmark_files.py's."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # an xdist worker does not start in the checkout's root
    sys.path.insert(0, str(ROOT))

from benchmarks.nexmark import generator  # noqa: E402

N = 500_000
BASE_US = 1_436_918_400_000_000  # 2015-07-15T00:00:00Z: datetime(2015, 7, 15, tzinfo=UTC)
STEP_US = 100  # 1e6 / 10,000 events per second
TS = pa.timestamp("us", tz="UTC")


def _us(column: pd.Series) -> np.ndarray:
    """A time column of :func:`_frame` as µs since the epoch."""
    return column.to_numpy()


def _frame(table: pa.Table) -> pd.DataFrame:
    """``table`` in pandas, its timestamps as int64 µs (as Parquet stores them)."""
    return pa.table({f.name: table.column(f.name).cast(pa.int64()) if f.type == TS
                     else table.column(f.name) for f in table.schema}).to_pandas()


@pytest.fixture(scope="module")
def tables() -> dict[str, pd.DataFrame]:
    return {k: _frame(t) for k, t in generator.generate(N, seed=7).items()}


def _bounded(observed: float, p: float, n: int) -> bool:
    """Within five standard errors of a share ``p`` over ``n`` draws."""
    return abs(observed - p) < 5 * np.sqrt(p * (1 - p) / n)


def test_columns_and_types_are_nexmarks_in_snake_case() -> None:
    got = generator.generate(500, seed=1)
    s, i = pa.string(), pa.int64()
    assert [(f.name, f.type) for f in got["person"].schema] == [
        ("id", i), ("name", s), ("email_address", s), ("credit_card", s), ("city", s),
        ("state", s), ("date_time", TS), ("extra", s), ("arrival_time", TS)]
    assert [(f.name, f.type) for f in got["auction"].schema] == [
        ("id", i), ("item_name", s), ("description", s), ("initial_bid", i), ("reserve", i),
        ("date_time", TS), ("expires", TS), ("seller", i), ("category", i), ("extra", s),
        ("arrival_time", TS)]
    assert [(f.name, f.type) for f in got["bid"].schema] == [
        ("auction", i), ("bidder", i), ("price", i), ("channel", s), ("url", s),
        ("date_time", TS), ("extra", s), ("arrival_time", TS)]


def test_kinds_by_event_id_mod_50_and_the_event_times(tables) -> None:
    """1 : 3 : 46 of every 50 events exactly; the times are ``base + e * 100 µs`` for each
    event id ``e`` in [0, N) once, a span of N / rate = 50 s; ``e % 50`` names the kind."""
    assert [len(tables[k]) for k in ("person", "auction", "bid")] == [10_000, 30_000, 460_000]
    eids = {k: (_us(t.date_time) - BASE_US) // STEP_US for k, t in tables.items()}
    every = np.sort(np.concatenate(list(eids.values())))
    assert np.array_equal(every, np.arange(N))
    assert (_us(tables["bid"].date_time).max() - BASE_US) == (N - 1) * STEP_US
    assert set(eids["person"] % 50) == {0}
    assert set(eids["auction"] % 50) == {1, 2, 3}
    assert set(eids["bid"] % 50) == set(range(4, 50))


def test_ids_count_up_from_1000(tables) -> None:
    for kind, count in (("person", 10_000), ("auction", 30_000)):
        ids = tables[kind].sort_values("date_time").id.to_numpy()
        assert np.array_equal(ids, 1000 + np.arange(count)), kind


def _newest(created: pd.DataFrame, at: pd.Series) -> np.ndarray:
    """The id of the newest of ``created`` (by date_time) at each time of ``at``."""
    by_time = created.sort_values("date_time")
    return by_time.id.to_numpy()[np.searchsorted(_us(by_time.date_time), _us(at),
                                                 side="right") - 1]


def test_bids_and_auctions_name_recent_or_next_ids(tables) -> None:
    """nextBase0AuctionId: one of the last 100 auctions .. the next 10 (AUCTION_ID_LEAD);
    nextBase0PersonId: one of the last 1000 people .. the next 10 (PERSON_ID_LEAD); the hot
    ones (first/second of the newest batch of 100) lie inside those ranges."""
    bid, auction = tables["bid"], tables["auction"]
    newest_auction = _newest(auction, bid.date_time)
    assert (bid.auction >= np.maximum(newest_auction - 100, 1000)).all()
    assert (bid.auction <= newest_auction + 10).all()
    for rows, column in ((bid, "bidder"), (auction, "seller")):
        newest_person = _newest(tables["person"], rows.date_time)
        assert (rows[column] >= np.maximum(newest_person + 1 - 1000, 1000)).all(), column
        assert (rows[column] <= newest_person + 10).all(), column


def test_hot_auctions_bidders_and_sellers(tables) -> None:
    """BidGenerator: ``nextInt(hotAuctionRatio=2) > 0`` (P 1/2) names the first auction of
    the newest batch of 100; otherwise a uniform draw over the 111 ids [newest - 100,
    newest + 10] names it with P 1/111: share 1/2 + 1/2 * 1/111. A hot bidder (P 3/4 for
    hotBiddersRatio 4) is the second person of the newest batch of 100, else one of 1010
    ids [people - 1000, people + 9]: 3/4 + 1/4 * 1/1010; a hot seller the first, the same
    share. Counted once those windows are full (newest auction base-0 >= 100, newest
    person base-0 >= 999)."""
    bid, auction = tables["bid"], tables["auction"]
    a0 = _newest(auction, bid.date_time) - 1000
    p0 = _newest(tables["person"], bid.date_time) - 1000
    full = (a0 >= 100) & (p0 >= 999)
    hot_auction = (bid.auction.to_numpy() - 1000 == (a0 // 100) * 100)[full]
    assert _bounded(hot_auction.mean(), 1 / 2 + 1 / 2 / 111, full.sum())
    hot_bidder = (bid.bidder.to_numpy() - 1000 == (p0 // 100) * 100 + 1)[full]
    assert _bounded(hot_bidder.mean(), 3 / 4 + 1 / 4 / 1010, full.sum())
    s0 = _newest(tables["person"], auction.date_time) - 1000
    hot_seller = (auction.seller.to_numpy() - 1000 == (s0 // 100) * 100)[s0 >= 999]
    assert _bounded(hot_seller.mean(), 3 / 4 + 1 / 4 / 1010, (s0 >= 999).sum())


def test_channels_half_through_four_hot_ones(tables) -> None:
    """``nextInt(2) > 0``: one of Google, Facebook, Baidu, Apple (1/8 each, one URL each);
    else channel-i of 10,000, nine in ten URLs with ``&channel_id=``."""
    bid = tables["bid"]
    hot = bid.channel.isin(["Google", "Facebook", "Baidu", "Apple"])
    for name in ("Google", "Facebook", "Baidu", "Apple"):
        assert _bounded((bid.channel == name).mean(), 1 / 8, len(bid)), name
    assert (bid[hot].groupby("channel").url.nunique() == 1).all()
    other = bid[~hot]
    number = other.channel.str.extract(r"^channel-(\d+)$")[0].astype(int)
    assert number.between(0, 9_999).all() and number.nunique() > 9_000
    assert other.url.str.match(r"^https://www\.nexmark\.com/[a-z_]{3,4}/[a-z_]{3,4}/"
                               r"[a-z_]{3,4}/item\.htm\?query=1(&channel_id=-?\d+)?$").all()
    urls = other.groupby("channel").url.first()
    with_id = urls.str.contains("&channel_id=")
    assert _bounded(with_id.mean(), 9 / 10, len(with_id))
    # the id is Math.abs(Integer.reverse(i)): 2 = bit 1 -> bit 30; 1 -> bit 31, MIN_VALUE,
    # whose abs is itself in Java; 6 = bits 1, 2 -> bits 30, 29
    ids = urls[with_id].str.extract(r"channel_id=(-?\d+)$")[0].astype(int)
    for i, expected in ((1, -2**31), (2, 2**30), (6, 2**30 + 2**29)):
        assert ids.get(f"channel-{i}", expected) == expected, i
    assert len({"channel-1", "channel-2", "channel-6"} & set(ids.index)) >= 2


def _ks_uniform(u: np.ndarray) -> float:
    """Kolmogorov-Smirnov distance of ``u`` from uniform on [0, 1]."""
    u = np.sort(u)
    n = len(u)
    return float(max((np.arange(1, n + 1) / n - u).max(), (u - np.arange(n) / n).max()))


def test_prices_are_log_uniform_over_100_to_1e8(tables) -> None:
    """PriceGenerator: ``round(10 ** (6u) * 100)``: log10(price) uniform on [2, 8]. The KS
    bound is the 0.1% critical value 1.95 / sqrt(n), plus 0.001 for the rounding to whole
    prices (at most 0.5 / 100 of a price, 0.0004 of the log range)."""
    prices = {"bid": tables["bid"].price, "initial_bid": tables["auction"].initial_bid,
              "reserve - initial_bid": tables["auction"].reserve - tables["auction"].initial_bid}
    for name, p in prices.items():
        assert p.min() >= 100 and p.max() <= 100_000_000, name
        u = (np.log10(p.to_numpy()) - 2) / 6
        assert _ks_uniform(u) < 1.95 / np.sqrt(len(u)) + 0.001, name


def test_auction_categories_and_lengths(tables) -> None:
    """Categories 10 + nextInt(5). Length: 1 + nextLong(2 * horizon) ms, the horizon being
    the time to the event 100 * 50 / 3 = 1666 events ahead, 166.6 ms -> 166 ms: uniform on
    1 .. 332 ms, mean 166.5 ms."""
    auction = tables["auction"]
    assert sorted(auction.category.unique()) == [10, 11, 12, 13, 14]
    assert _bounded((auction.category == 12).mean(), 1 / 5, len(auction))
    length = _us(auction.expires) - _us(auction.date_time)
    assert (length % 1000 == 0).all()
    assert length.min() >= 1000 and length.max() <= 332_000
    sd = 332_000 / np.sqrt(12)
    assert abs(length.mean() - 166_500) < 5 * sd / np.sqrt(len(length))


def test_arrival_times_and_the_delayed_share(tables) -> None:
    """Beam's UnboundedEventSource: with P probDelayedEvent = 0.1 an event is held back
    ``1 + nextLong(3000)`` ms; the rest arrive at their event time (in-order groups). Each
    stream is in arrival order."""
    arrival = np.concatenate([_us(t.arrival_time) for t in tables.values()])
    event = np.concatenate([_us(t.date_time) for t in tables.values()])
    delay = arrival - event
    assert (delay >= 0).all()
    assert _bounded((delay > 0).mean(), 0.1, N)
    held = delay[delay > 0]
    assert (held % 1000 == 0).all() and held.min() >= 1000 and held.max() <= 3_000_000
    assert abs(held.mean() - 1_500_500) < 5 * (3_000_000 / np.sqrt(12)) / np.sqrt(len(held))
    for kind, t in tables.items():
        assert (np.diff(_us(t.arrival_time)) >= 0).all(), kind


def test_extra_pads_to_nexmarks_average_sizes(tables) -> None:
    """nextExtra: d = average - size of the other fields, a length uniform in
    [d - round(d / 5), d + round(d / 5)). A bid's fields count 32 bytes: d = 68, lengths
    54 .. 81, mean 67.5; a person's and an auction's total averages 200 and 500."""
    bid_extra = tables["bid"].extra.str.len()
    assert bid_extra.min() == 54 and bid_extra.max() == 81
    assert abs(bid_extra.mean() - 67.5) < 5 * (28 / np.sqrt(12)) / np.sqrt(len(bid_extra))
    p, a = tables["person"], tables["auction"]
    person = 8 + sum(p[c].str.len() for c in ("name", "email_address", "credit_card",
                                                "city", "state", "extra"))
    auction = 8 + a.item_name.str.len() + a.description.str.len() + 40 + a.extra.str.len()
    assert abs(person.mean() - 200) < 1 and abs(auction.mean() - 500) < 2
    assert p.extra.str.fullmatch(r"[H-z]+").all()  # Java's signed % 26: 'a' - 25 .. 'z'


def test_people_come_from_nexmarks_lists(tables) -> None:
    p = tables["person"]
    first = {"Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
             "Deiter", "Walter"}
    last = {"Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
            "Noris"}
    names = p.name.str.split(" ", expand=True)
    assert set(names[0]) == first and set(names[1]) == last
    assert set(p.state) == {"AZ", "CA", "ID", "OR", "WA", "WY"}
    assert len(set(p.city)) == 10 and {"Phoenix", "Bend", "Cheyenne"} <= set(p.city)
    assert p.credit_card.str.fullmatch(r"\d{4} \d{4} \d{4} \d{4}").all()
    word = r"(?:[a-z](?:[a-z ]*[a-z])?)?"  # nextString, trimmed (rarely all spaces: empty)
    assert p.email_address.str.fullmatch(word + "@" + word + r"\.com").all()
    item = tables["auction"].item_name
    assert item.str.fullmatch(word).all() and item.str.len().max() <= 19


def test_one_seed_one_stream_and_a_prefix_of_a_longer_run(tmp_path: Path) -> None:
    a, b = generator.generate(20_000, seed=3), generator.generate(20_000, seed=3)
    assert all(a[k].equals(b[k]) for k in a)
    other = generator.generate(20_000, seed=4)
    assert not a["bid"].column("price").equals(other["bid"].column("price"))
    longer = generator.generate(60_000, seed=3)
    for kind, t in a.items():
        first = longer[kind].filter(pc.less(
            longer[kind].column("date_time"), pa.scalar(BASE_US + 20_000 * STEP_US, TS)))
        assert first.equals(t), kind
    for out in ("one", "two"):
        generator.write(tmp_path / out, 20_000, seed=3, file_seconds=0.5)
    files = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*.parquet"))
    assert len(files) > 3
    for f in files:
        assert (tmp_path / "one" / f).read_bytes() == (tmp_path / "two" / f).read_bytes(), f


def test_out_of_order_groups_scramble_each_group(tables) -> None:
    """nextAdjustedEventNumber: the k-th emitted event is event (k // g) * g + (k * 953) % g.
    For g = 10, 953 = 3 (mod 10): slots 0, 3, 6, 9, 2, 5, 8, 1, 4, 7 of each group. A group
    arrives when its last event has happened: the k-th at slot k + 9."""
    got = generator.generate(1_000, seed=5, out_of_order_group_size=10, prob_delayed_event=0.0)
    rows = pd.concat([_frame(t)[["date_time", "arrival_time"]] for t in got.values()])
    rows = rows.sort_values("arrival_time")
    slots = (_us(rows.date_time) - BASE_US) // STEP_US
    assert list(slots[:20]) == [0, 3, 6, 9, 2, 5, 8, 1, 4, 7, 10, 13, 16, 19, 12, 15, 18, 11, 14, 17]
    assert np.array_equal(np.sort(slots), np.arange(1_000))
    assert np.array_equal(_us(rows.arrival_time), BASE_US + (np.arange(1_000) + 9) * STEP_US)
    # the kind follows the scrambled id: the auctions (e % 50 in 1..3) of group 0 are
    # emitted at k = 1, 4, 7 (events 3, 2, 1), so their ids come in the order 1002, 1001, 1000
    assert list(got["auction"].column("id").to_pylist()[:3]) == [1002, 1001, 1000]


def test_written_files_hold_spans_of_arrival_and_match_generate(tmp_path: Path,
                                                                 monkeypatch) -> None:
    """Blocks of 700 events (not a multiple of 50, nor of the 0.02 s files' 200 events): a
    file's rows carried over from one block to the next are written once, in order."""
    monkeypatch.setattr(generator, "BLOCK_EVENTS", 700)
    rows = generator.write(tmp_path, 5_000, seed=9, file_seconds=0.02)
    expected = generator.generate(5_000, seed=9)
    assert rows == {"person": 100, "auction": 300, "bid": 4_600}
    for kind, t in expected.items():
        files = sorted((tmp_path / kind).glob("part-*.parquet"))
        assert len(files) >= 20, kind
        assert pa.concat_tables([pq.read_table(f) for f in files]).equals(t), kind
        for f in files:
            span = int(re.fullmatch(r"part-(\d{6})\.parquet", f.name)[1])
            arrival = pq.read_table(f).column("arrival_time").cast(pa.int64()).to_numpy()
            assert ((arrival - BASE_US) // 20_000 == span).all(), f
