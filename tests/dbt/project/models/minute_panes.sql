-- Figure 8 appended run by run: one global window, a discarding pane every processing-time
-- minute. Each run reads the rows that arrived since the last pane it appended, so the
-- appended panes are Figure 8's (the trigger's minutes are aligned, not per run). The
-- first run stops at var('arrived_before') to leave something for the next one.
{{ config(materialized='incremental', incremental_strategy='append') }}
select key, sum(value) as total
from {{ ref('scores') }}
{% if is_incremental() %}
where arrival_time >= (select max(emit_time) from {{ this }})
{% else %}
where arrival_time < timestamp'{{ var("arrived_before", "9999-12-31 00:00:00") }}'
{% endif %}
group by key
window global
processing time arrival_time
trigger every 1 minute
emit discarding
