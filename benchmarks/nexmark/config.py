"""Nexmark's knobs and constants, with Nexmark's own defaults, and the id arithmetic that
follows from them.

The names and values are those of nexmark/nexmark's ``NexmarkConfiguration`` and
``GeneratorConfig`` (nexmark-flink/src/main/java/com/github/nexmark/flink/), cross-checked
against Beam's copy (sdks/java/testing/nexmark/…/sources/generator/); the constants that
are not knobs there (``FIRST_PERSON_ID``, ``NUM_CATEGORIES``, the ``HOT_*_RATIO`` batch
sizes, the id leads, the name lists) are the generators' ``private static final`` values.
The functions here are the id rules of ``PersonGenerator`` and ``AuctionGenerator`` over
numpy arrays of event ids: pure arithmetic, no draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

#: Ids start here so queries find matches even on small data sets (GeneratorConfig).
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
#: AuctionGenerator: categories are FIRST_CATEGORY_ID + [0, NUM_CATEGORIES).
NUM_CATEGORIES = 5
#: Yet-to-be-created people and auctions a draw may name (PERSON_ID_LEAD, AUCTION_ID_LEAD).
PERSON_ID_LEAD = 10
AUCTION_ID_LEAD = 10
#: The hot seller, bidder and auction is the first (bidder: second) of each batch of this
#: many ids (HOT_SELLER_RATIO, HOT_BIDDER_RATIO, HOT_AUCTION_RATIO, all 100 in both copies).
HOT_BATCH = 100
#: BidGenerator: half the bids come through one of four hot channels.
HOT_CHANNELS_RATIO = 2
HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
CHANNELS_NUMBER = 10_000
#: The offset multiplier of GeneratorConfig.nextAdjustedEventNumber (out-of-order groups).
OUT_OF_ORDER_MULTIPLIER = 953
#: Beam's NexmarkUtils.BASE_TIME, 2015-07-15T00:00:00Z, in microseconds since the epoch.
BASE_TIME_US = 1_436_918_400_000_000

US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend",
             "Redmond", "Seattle", "Kent", "Cheyenne")
FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah",
               "Deiter", "Walter")
LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones",
              "Noris")


@dataclass(frozen=True)
class NexmarkConfig:
    """The generator's knobs; the defaults are NexmarkConfiguration's."""

    #: firstEventRate: events per second of event time (one generator).
    rate: int = 10_000
    person_proportion: int = 1
    auction_proportion: int = 3
    bid_proportion: int = 46
    avg_person_byte_size: int = 200
    avg_auction_byte_size: int = 500
    avg_bid_byte_size: int = 100
    #: P(hot) = 1 - 1/ratio for a bid's auction, an auction's seller, a bid's bidder.
    hot_auction_ratio: int = 2
    hot_sellers_ratio: int = 4
    hot_bidders_ratio: int = 4
    num_in_flight_auctions: int = 100
    num_active_people: int = 1000
    #: Beam's UnboundedEventSource holds back this share of events by 1 ms .. this long.
    prob_delayed_event: float = 0.1
    occasional_delay_sec: int = 3
    #: 1: in order; n: each group of n events is emitted in a scrambled order.
    out_of_order_group_size: int = 1
    base_time_us: int = BASE_TIME_US

    def __post_init__(self) -> None:
        if self.rate <= 0 or self.out_of_order_group_size <= 0:
            raise ValueError("rate and out_of_order_group_size must be positive")
        if not 0.0 <= self.prob_delayed_event <= 1.0:
            raise ValueError("prob_delayed_event must be in [0, 1]")

    @property
    def total_proportion(self) -> int:
        return self.person_proportion + self.auction_proportion + self.bid_proportion

    def timestamp_us(self, event_number: np.ndarray) -> np.ndarray:
        """Event time of an event number: ``base + number * 1e6 / rate`` µs
        (GeneratorConfig.timestampForEvent, kept in µs where Nexmark truncates to ms)."""
        return self.base_time_us + (event_number * 1_000_000) // self.rate

    def adjusted_event_number(self, event_number: np.ndarray) -> np.ndarray:
        """GeneratorConfig.nextAdjustedEventNumber: the number whose id and time the
        ``event_number``-th emitted event carries (a permutation within each full group,
        953 being prime)."""
        n = self.out_of_order_group_size
        return (event_number // n) * n + (event_number * OUT_OF_ORDER_MULTIPLIER) % n

    def last_base0_person_id(self, event_id: np.ndarray) -> np.ndarray:
        """PersonGenerator.lastBase0PersonId: the newest person at ``event_id`` (the person
        itself when the event is one)."""
        epoch, offset = np.divmod(event_id, self.total_proportion)
        return epoch * self.person_proportion + np.minimum(offset, self.person_proportion - 1)

    def last_base0_auction_id(self, event_id: np.ndarray) -> np.ndarray:
        """AuctionGenerator.lastBase0AuctionId: the newest auction at ``event_id`` (-1 before
        the first)."""
        epoch, offset = np.divmod(event_id, self.total_proportion)
        pp, ap = self.person_proportion, self.auction_proportion
        before = offset < pp  # a person: the last auction of the previous epoch
        return np.where(before, (epoch - 1) * ap + ap - 1,
                        epoch * ap + np.minimum(offset - pp, ap - 1))
