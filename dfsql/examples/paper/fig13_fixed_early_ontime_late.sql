-- Figure 13: fixed windows, early panes every minute, on-time, late
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW FIXED(2 MINUTES) ON event_time
WATERMARK FROM paper_watermarks
PROCESSING TIME arrival_time
ALLOWED LATENESS 10 MINUTES
TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK
EMIT ACCUMULATING;
