-- q7, highest bid: the bids at the highest price of their 10-second window
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, window_end AS date_time FROM bid
  WINDOW FIXED(10 SECONDS) ON date_time
) B1
ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL 10 SECONDS AND B1.date_time
