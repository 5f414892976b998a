"""The JSON form of stored values: what nodestep writes for a state, and how to read it back.

``dump_json_object`` gives the compact JSON text nodestep stores (keys sorted by default),
``load_json_object`` reads such text back, and ``to_json_value`` gives the JSON data of a
value (models, dataclasses, sets, ...) as the stores keep it.
"""

from nodestep._public import publish as _publish
from nodestep._state.json import dump_json_object, load_json_object, to_json_value

__all__ = ["dump_json_object", "load_json_object", "to_json_value"]

_publish(__name__, __all__, globals())
