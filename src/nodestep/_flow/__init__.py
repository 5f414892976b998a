"""The flow language: nodes, edges and routes, and checking a whole flow before it runs."""
