-- q12, processing-time windows: each bidder's bids per 10 seconds of arrival
SELECT bidder, bid_count, starttime, endtime FROM (
  SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
  FROM bid GROUP BY bidder
  WINDOW FIXED(10 SECONDS) ON arrival_time PROCESSING TIME arrival_time
)
