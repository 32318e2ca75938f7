-- q11, user sessions: each bidder's bids in sessions of 10 seconds' inactivity
SELECT bidder, bid_count, starttime, endtime FROM (
  SELECT bidder, COUNT(*) AS bid_count, window_start AS starttime, window_end AS endtime
  FROM bid GROUP BY bidder
  WINDOW SESSIONS(GAP 10 SECONDS) ON date_time
)
