-- Figure 10 as a view: fixed two-minute windows over the whole input (one pane each);
-- the view is the windowed query, planned again on each read
{{ config(materialized='view') }}
select key, sum(value) as total
from {{ ref('scores') }}
group by key
window fixed(2 minutes) on event_time
emit accumulating
