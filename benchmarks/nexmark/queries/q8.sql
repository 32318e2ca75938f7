-- q8, monitor new users: people who opened an auction in the 10 seconds they joined in
SELECT P.id, P.name, P.starttime
FROM (
  SELECT id, name, window_start AS starttime, window_end AS endtime FROM person
  GROUP BY id, name WINDOW FIXED(10 SECONDS) ON date_time
) P
JOIN (
  SELECT seller, window_start AS starttime, window_end AS endtime FROM auction
  GROUP BY seller WINDOW FIXED(10 SECONDS) ON date_time
) A
ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
