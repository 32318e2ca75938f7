-- q19, the ten highest bids of each auction (with their rank, as SELECT * gives it)
SELECT auction, bidder, price, channel, url, date_time, extra, rank_number
FROM (
  SELECT auction, bidder, price, channel, url, date_time, extra,
    ROW_NUMBER() OVER (PARTITION BY auction ORDER BY price DESC) AS rank_number
  FROM bid
)
WHERE rank_number <= 10
