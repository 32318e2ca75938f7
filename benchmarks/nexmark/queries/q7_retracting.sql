-- q7's windows with dfsql's panes: the highest price of each 10-second window, early
-- each second of arrival, on time at the watermark, late per late bid for 5 seconds,
-- each pane retracting the one before
SELECT MAX(price) AS maxprice FROM bid
WINDOW FIXED(10 SECONDS) ON date_time
WATERMARK DELAY 2 SECONDS PROCESSING TIME arrival_time
ALLOWED LATENESS 5 SECONDS
TRIGGER AT WATERMARK EARLY EVERY 1 SECOND LATE EVERY 1 ROW
EMIT ACCUMULATING AND RETRACTING
