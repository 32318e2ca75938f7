-- Singular test: over a retracting changelog, the signed totals (retractions negative)
-- add up to the live sessions' values, here every score once (no row of the paper's data
-- is dropped under ALLOWED LATENESS 10 MINUTES). Returns a row, so fails, otherwise.
select net, all_scores
from (select sum(case when is_retraction then -total else total end) as net
      from {{ ref('session_changelog') }}) c
cross join (select sum(value) as all_scores from {{ ref('scores') }}) s
where net <> all_scores
