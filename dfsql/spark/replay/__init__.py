"""A bounded table replayed in processing-time order: the model's driver on Spark."""
