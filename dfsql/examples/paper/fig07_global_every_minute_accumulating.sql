-- Figure 7: global window, periodic processing-time trigger, accumulating
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW GLOBAL
PROCESSING TIME arrival_time
TRIGGER EVERY 1 MINUTE
EMIT ACCUMULATING;
