-- Figure 8: global window, periodic processing-time trigger, discarding
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW GLOBAL
PROCESSING TIME arrival_time
TRIGGER EVERY 1 MINUTE
EMIT DISCARDING;
