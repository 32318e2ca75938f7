-- Figure 10: fixed 2-minute windows on a batch engine
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW FIXED(2 MINUTES) ON event_time
EMIT ACCUMULATING;
