-- Figure 12: fixed 2-minute windows on a streaming engine; the 9 is late
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW FIXED(2 MINUTES) ON event_time
WATERMARK FROM paper_watermarks
PROCESSING TIME arrival_time
ALLOWED LATENESS 10 MINUTES
EMIT ACCUMULATING;
