-- q5 in Spark's own SQL: window() for the sliding windows
SELECT AuctionBids.auction, AuctionBids.num
FROM (
  SELECT auction, COUNT(*) AS num, window.start AS starttime, window.end AS endtime
  FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.starttime, CountBids.endtime
  FROM (
    SELECT COUNT(*) AS num, window.start AS starttime, window.end AS endtime
    FROM bid GROUP BY auction, window(date_time, '10 seconds', '2 seconds')
  ) AS CountBids
  GROUP BY CountBids.starttime, CountBids.endtime
) AS MaxBids
ON AuctionBids.starttime = MaxBids.starttime
  AND AuctionBids.endtime = MaxBids.endtime
  AND AuctionBids.num >= MaxBids.maxn
