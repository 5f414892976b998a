"""State stores: the interface, the built-in back ends, and the public history types."""
