-- q12 in Spark's own SQL: window() over the arrival time
SELECT bidder, COUNT(*) AS bid_count, window.start AS starttime, window.end AS endtime
FROM bid GROUP BY bidder, window(arrival_time, '10 seconds')
