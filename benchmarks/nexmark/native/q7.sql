-- q7 in Spark's own SQL: window() for the fixed windows
SELECT B.auction, B.price, B.bidder, B.date_time, B.extra
FROM bid B
JOIN (
  SELECT MAX(price) AS maxprice, window.end AS date_time FROM bid
  GROUP BY window(date_time, '10 seconds')
) B1
ON B.price = B1.maxprice
WHERE B.date_time BETWEEN B1.date_time - INTERVAL 10 SECONDS AND B1.date_time
