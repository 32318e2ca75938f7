-- q20, expand bid with auction: the bids on auctions of category 10, with their auction
-- (the two date_time and extra columns named as Nexmark's result table names them)
SELECT
  auction, bidder, price, channel, url, B.date_time AS bid_date_time, B.extra AS bid_extra,
  item_name, description, initial_bid, reserve, A.date_time AS auction_date_time, expires,
  seller, category, A.extra AS auction_extra
FROM bid AS B INNER JOIN auction AS A ON B.auction = A.id
WHERE A.category = 10
