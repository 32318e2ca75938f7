-- A plain model (no WINDOW): each key's total and count, Figure 6's classic batch
{{ config(materialized='table') }}
select key, sum(value) as total, count(*) as n
from {{ ref('scores') }}
group by key
