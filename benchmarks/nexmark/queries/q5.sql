-- q5, hot items: the auctions with the most bids in each 10-second window, every 2 seconds
SELECT AuctionBids.auction, AuctionBids.num
FROM (
  SELECT auction, COUNT(*) AS num FROM bid GROUP BY auction
  WINDOW SLIDING(10 SECONDS, EVERY 2 SECONDS) ON date_time
) AS AuctionBids
JOIN (
  SELECT MAX(CountBids.num) AS maxn, CountBids.window_start, CountBids.window_end
  FROM (
    SELECT auction, COUNT(*) AS num FROM bid GROUP BY auction
    WINDOW SLIDING(10 SECONDS, EVERY 2 SECONDS) ON date_time
  ) AS CountBids
  GROUP BY CountBids.window_start, CountBids.window_end
) AS MaxBids
ON AuctionBids.window_start = MaxBids.window_start
  AND AuctionBids.window_end = MaxBids.window_end
  AND AuctionBids.num >= MaxBids.maxn
