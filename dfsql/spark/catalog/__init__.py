"""What outlives a session: the catalog, persistent windowed views, writes."""
