"""Graphs declared in YAML manifests: the loader (``load_graph``) and the manifest format."""
