-- Figure 6: classic batch, one global window
SELECT key, SUM(value) AS total
FROM scores
GROUP BY key
WINDOW GLOBAL;
