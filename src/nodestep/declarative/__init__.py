"""Graphs declared in YAML manifests: ``load_graph`` and the manifest's JSON Schema."""

from nodestep.declarative.format import MANIFEST_VERSION, manifest_json_schema
from nodestep.declarative.loader import load_graph

__all__ = ["MANIFEST_VERSION", "load_graph", "manifest_json_schema"]
