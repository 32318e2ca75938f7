-- q4, average price per category: of each auction's winning bid (its highest while open)
SELECT Q.category, AVG(Q.final) AS final
FROM (
  SELECT MAX(B.price) AS final, A.category
  FROM auction A, bid B
  WHERE A.id = B.auction AND B.date_time BETWEEN A.date_time AND A.expires
  GROUP BY A.id, A.category
) Q
GROUP BY Q.category
