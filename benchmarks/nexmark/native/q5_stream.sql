-- q5 in Spark's own SQL for structured streaming: the window struct itself is kept and
-- joined on, so its event-time watermark reaches the second aggregation and the join
-- (window.start projected alone carries none, and Spark refuses append mode there)
SELECT AuctionBids.auction, AuctionBids.num
FROM (
  SELECT auction, COUNT(*) AS num, window
  FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.window
  FROM (
    SELECT COUNT(*) AS num, window
    FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
  ) AS CountBids
  GROUP BY CountBids.window
) AS MaxBids
ON AuctionBids.window = MaxBids.window AND AuctionBids.num >= MaxBids.maxn
