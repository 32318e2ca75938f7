-- q14, calculation: bids of middling euro price, the time of day they came at, and how
-- many 'c's their extra holds (Nexmark's count_char function, in Spark's own functions)
SELECT auction, bidder, 0.908 * price AS price,
  CASE
    WHEN HOUR(date_time) >= 8 AND HOUR(date_time) <= 18 THEN 'dayTime'
    WHEN HOUR(date_time) <= 6 OR HOUR(date_time) >= 20 THEN 'nightTime'
    ELSE 'otherTime'
  END AS bid_time_type,
  date_time, extra,
  LENGTH(extra) - LENGTH(REPLACE(extra, 'c', '')) AS c_counts
FROM bid
WHERE 0.908 * price > 1000000 AND 0.908 * price < 50000000
