-- Figure 14: sessions with a one-minute gap, early/on-time/late panes, accumulating and retracting
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW SESSIONS(GAP 1 MINUTE) ON event_time
WATERMARK FROM paper_watermarks
PROCESSING TIME arrival_time
ALLOWED LATENESS 10 MINUTES
TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK
EMIT ACCUMULATING AND RETRACTING;
