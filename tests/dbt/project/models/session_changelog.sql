-- Figure 14 as a table: sessions with a one-minute gap, early/on-time/late panes,
-- accumulating and retracting; the table keeps the whole changelog, retractions included
{{ config(materialized='table') }}
select key, sum(value) as total
from {{ ref('scores') }}
group by key
window sessions(gap 1 minute) on event_time
watermark from {{ ref('paper_watermarks') }}
processing time arrival_time
allowed lateness 10 minutes
trigger every 1 minute until watermark then repeat watermark
emit accumulating and retracting
