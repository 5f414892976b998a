"""Graphs: nodes, flow, validation and drawing."""
