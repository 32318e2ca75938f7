"""Live streams: planning, packing micro-batches, the bucket processor, the sinks."""
