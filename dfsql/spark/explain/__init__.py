"""EXPLAIN FIRINGS and EXPLAIN WATERMARK on Spark (docs/reference.md#explaining-time)."""
