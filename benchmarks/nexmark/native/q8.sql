-- q8 in Spark's own SQL: window() for the fixed windows
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window.start AS starttime, window.end AS endtime FROM person
  GROUP BY id, name, window(date_time, '10 seconds')
) P
JOIN (
  SELECT seller, window.start AS starttime, window.end AS endtime FROM auction
  GROUP BY seller, window(date_time, '10 seconds')
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
