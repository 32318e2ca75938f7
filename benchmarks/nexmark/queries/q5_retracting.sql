-- q5's windows with dfsql's panes (no other engine has them): each auction's bids in
-- 10-second windows every 2 seconds, an early pane each second of arrival, the on-time
-- pane at the watermark, a late pane per late bid for 5 seconds, each pane retracting
-- the one before
SELECT auction, COUNT(*) AS num FROM bid GROUP BY auction
WINDOW SLIDING(10 SECONDS, EVERY 2 SECONDS) ON date_time
WATERMARK DELAY 2 SECONDS PROCESSING TIME arrival_time
ALLOWED LATENESS 5 SECONDS
TRIGGER AT WATERMARK EARLY EVERY 1 SECOND LATE EVERY 1 ROW
EMIT ACCUMULATING AND RETRACTING
