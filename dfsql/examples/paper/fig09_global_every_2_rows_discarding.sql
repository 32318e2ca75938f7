-- Figure 9: global window, count trigger of two, discarding
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW GLOBAL
PROCESSING TIME arrival_time
TRIGGER EVERY 2 ROWS
EMIT DISCARDING;
