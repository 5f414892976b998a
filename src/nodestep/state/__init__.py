"""State: the schema, reducers, channels and the JSON form of stored values."""

from nodestep.state.base import BaseState
from nodestep.state.json import dump_json_object, load_json_object, to_json_value
from nodestep.state.reducers import Replace, add, merge_dict, replace
from nodestep.state.schema import StateSchema

__all__ = [
    "BaseState",
    "Replace",
    "StateSchema",
    "add",
    "dump_json_object",
    "load_json_object",
    "merge_dict",
    "replace",
    "to_json_value",
]
