-- q11's sessions with dfsql's panes: each bidder's sessions (10 seconds' gap), early
-- each second of arrival, on time at the watermark, late per late bid for 5 seconds; a
-- session that a late bid merges with another retracts both
SELECT bidder, COUNT(*) AS bid_count FROM bid GROUP BY bidder
WINDOW SESSIONS(GAP 10 SECONDS) ON date_time
WATERMARK DELAY 2 SECONDS PROCESSING TIME arrival_time
ALLOWED LATENESS 5 SECONDS
TRIGGER AT WATERMARK EARLY EVERY 1 SECOND LATE EVERY 1 ROW
EMIT ACCUMULATING AND RETRACTING
