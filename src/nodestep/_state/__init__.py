"""State: the schema, reducers, channels and the JSON form of stored values."""
