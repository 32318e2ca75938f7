"""Planning a statement on Spark: its blocks, and the one choice of what runs each."""
