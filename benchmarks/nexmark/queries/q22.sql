-- q22, get URL directories: the first three directories of each bid's URL (Flink's
-- SPLIT_INDEX(url, '/', i) counts from 0, as Spark's split(...)[i] does)
SELECT
  auction, bidder, price, channel,
  split(url, '/')[3] AS dir1,
  split(url, '/')[4] AS dir2,
  split(url, '/')[5] AS dir3
FROM bid
