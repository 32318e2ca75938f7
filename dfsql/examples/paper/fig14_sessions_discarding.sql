-- Figure 14 in discarding mode: the panes partition the ten values
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW SESSIONS(GAP 1 MINUTE) ON event_time
WATERMARK FROM paper_watermarks
PROCESSING TIME arrival_time
ALLOWED LATENESS 10 MINUTES
TRIGGER EVERY 1 MINUTE UNTIL WATERMARK THEN REPEAT WATERMARK
EMIT DISCARDING;
