-- q0, pass-through: every bid as it is (nexmark/nexmark queries/q0.sql)
SELECT auction, bidder, price, date_time, extra FROM bid
