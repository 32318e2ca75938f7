-- q11 in Spark's own SQL: session_window()
SELECT bidder, COUNT(*) AS bid_count, session_window.start AS starttime,
  session_window.end AS endtime
FROM bid GROUP BY bidder, session_window(date_time, '10 seconds')
