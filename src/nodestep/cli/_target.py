"""``load_target``: the graph or agent a command line argument names.

A target is one of four things, told apart by its form:

- ``package.module:attr``: an attribute of an importable module (dotted ``attr`` reaches
  into it: ``app.graphs:flows.review``);
- ``path/to/file.py:attr``: an attribute of a Python file, run as a module of its own;
- ``path/to/graph.yaml`` or a folder of ``kind: Graph`` manifests: ``load_graph``;
- a folder of agent specs (``kind: LLMNode``, ...): an ``Agent``, started at its only
  LLMNode or at the one ``folder:NAME`` names.

Each way it can be wrong gets its own message, naming the text and what to write instead.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import re
import shlex
import sys
from pathlib import Path
from typing import Any

from nodestep import Agent, GraphConfigError, Node, ScriptedModel, load_graph
from nodestep import Graph as _Graph

__all__ = ["load_target", "target_graph"]

_SPEC_KINDS = re.compile(r"^kind:\s*['\"]?(LLMNode|ToolNode|FunctionNode|ServiceAccount)\b", re.M)
_FORMS = (
    "write 'package.module:attr', 'path/to/file.py:attr', a YAML graph file, or a folder of "
    "manifests or agent specs"
)


def load_target(text: str) -> _Graph[Any] | Agent:
    """Return the graph (or agent) that ``text`` names, as the ``nodestep`` commands take it.

    Args:
        text: ``package.module:attr``, ``path/to/file.py:attr``, a YAML graph file or
            folder of manifests (``load_graph``), or a folder of agent specs
            (``nodestep.agents.Agent``; ``folder:NAME`` picks the start LLMNode when it
            has several). An agent loaded from specs gets a ``ScriptedModel`` with no
            replies: enough to draw and check it; to run it with a real model, build the
            ``Agent`` in a module and name that (``app.agents:support``).

    Returns:
        A ``Graph`` or an ``Agent``.

    Raises:
        GraphConfigError: The text names nothing loadable: a module that does not import
            (with the import's own error), a missing attribute (listing the module's
            graphs), an attribute that is not a graph, a missing file, or a manifest or
            spec with problems (each at its file and line).
    """
    if not isinstance(text, str) or not text.strip():
        raise GraphConfigError(f"A target is a non-empty string, got {text!r}; {_FORMS}.")
    if "" not in sys.path and "." not in sys.path:
        # As `python -m` does: modules of the working directory import, for a module
        # target and for what a manifest names (its state class, its nodes' functions).
        sys.path.insert(0, "")
    path_part, colon, attr = _split(text)
    path = Path(path_part)
    if path.suffix in (".yaml", ".yml") or (not colon and path.is_dir()) or _specs_dir(text):
        return _from_yaml(text, path, attr if colon else None)
    if path_part.endswith(".py"):
        if not colon:
            raise GraphConfigError(
                f"Target {text!r} names a Python file but no attribute; write "
                f"'{path_part}:graph' with the name the file gives its graph."
            )
        return _checked(text, _attribute(text, _module_of_file(text, path), attr, path_part))
    if not colon:
        hint = " (no such file or folder)" if "/" in text or "." not in text else ""
        raise GraphConfigError(f"Target {text!r} has no ':attr'{hint}; {_FORMS}.")
    return _checked(text, _attribute(text, _module(text, path_part), attr, path_part))


def target_graph(target: _Graph[Any] | Agent) -> _Graph[Any]:
    """Return the graph of a target: itself, or an agent's ``graph``."""
    return target.graph if isinstance(target, Agent) else target


def _split(text: str) -> tuple[str, str, str]:
    # A Windows drive ("C:\\x.py:graph") has its colon first: the attribute follows the last.
    head, colon, tail = text.rpartition(":")
    if not colon or "/" in tail or "\\" in tail or tail.endswith((".py", ".yaml", ".yml")):
        return text, "", ""
    return head, colon, tail


def _specs_dir(text: str) -> bool:
    head, _, _ = text.rpartition(":")
    return bool(head) and Path(head).is_dir()


def _module(text: str, name: str) -> Any:
    if not re.fullmatch(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", name):
        raise GraphConfigError(
            f"Target {text!r}: {name!r} is not a module name or a file that exists; {_FORMS}."
        )
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name and name.startswith(e.name):
            raise GraphConfigError(
                f"Target {text!r}: no module named {e.name!r}. Run nodestep from the folder "
                f"that holds it, or give the file's path: 'path/to/{name.split('.')[-1]}.py:"
                f"attr'."
            ) from e
        raise _import_failed(text, name, e) from e
    except Exception as e:
        raise _import_failed(text, name, e) from e


def _module_of_file(text: str, path: Path) -> Any:
    if not path.is_file():
        raise GraphConfigError(f"Target {text!r}: no file {str(path)!r}; check the path.")
    name = f"_nodestep_target_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - a .py file always has one
        raise GraphConfigError(f"Target {text!r}: cannot load {str(path)!r} as Python.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pydantic look their module up by name
    folder = str(path.resolve().parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)  # the file's own imports of its neighbours work
    try:
        spec.loader.exec_module(module)
    except Exception as e:
        del sys.modules[name]
        raise _import_failed(text, str(path), e) from e
    return module


def _import_failed(text: str, name: str, error: BaseException) -> GraphConfigError:
    # A file (path/to/flows.py) is run by its path: `import path/to/flows.py` is no
    # Python, and run_path, unlike `python flows.py`, leaves its __main__ block alone.
    # The error's own full stop is dropped, so the sentence has one.
    path = json.dumps(name)  # a Python string in double quotes, so the shell's stay single
    code = f"import runpy; runpy.run_path({path})" if name.endswith(".py") else f"import {name}"
    see = f"python -c {shlex.quote(code)}"
    return GraphConfigError(
        f"Target {text!r}: importing {name!r} raised {type(error).__name__}: "
        f"{str(error).rstrip('.')}. Fix that module (run `{see}` to see the traceback)."
    )


def _attribute(text: str, module: Any, attr: str, shown: str) -> Any:
    value = module
    for part in attr.split("."):
        if not hasattr(value, part):
            graphs = sorted(k for k, v in vars(module).items() if isinstance(v, _Graph | Agent))
            found = f"it has {', '.join(graphs)}" if graphs else "it defines no Graph"
            raise GraphConfigError(
                f"Target {text!r}: {shown!r} has no attribute {attr!r}; {found}."
            )
        value = getattr(value, part)
    return value


def _checked(text: str, value: Any) -> _Graph[Any] | Agent:
    if isinstance(value, _Graph | Agent):
        return value
    # A class (a state class, say) and a node are callable too, but calling them makes no
    # graph; and a class's type's name would be pydantic's metaclass, not what was written.
    if isinstance(value, type):
        what, hint = f"the class {value.__name__}", ""
    elif isinstance(value, Node):
        what, hint = f"the node {value.name!r}", " (name the graph it is part of)"
    else:
        what = f"a {type(value).__name__}"
        hint = " (call it and name the result)" if callable(value) else ""
    raise GraphConfigError(f"Target {text!r} is {what}, not a nodestep Graph or Agent{hint}.")


def _from_yaml(text: str, path: Path, start: str | None) -> _Graph[Any] | Agent:
    if start is not None and path.suffix not in (".yaml", ".yml") and not path.is_dir():
        raise GraphConfigError(f"Target {text!r}: no folder {str(path)!r}; check the path.")
    if not path.exists():
        raise GraphConfigError(f"Target {text!r}: no file {str(path)!r}; check the path.")
    texts = [path.read_text(encoding="utf-8")] if path.is_file() else _yaml_texts(path)
    if not any(_SPEC_KINDS.search(t) for t in texts):
        if start is not None:
            raise GraphConfigError(
                f"Target {text!r}: ':{start}' picks an agent's start node, but {str(path)!r} "
                f"holds graph manifests; write {str(path)!r} alone."
            )
        return load_graph(path)
    if path.is_file():
        raise GraphConfigError(
            f"Target {text!r} is one agent spec; an agent is a folder of specs: name the "
            f"folder {str(path.parent)!r}."
        )
    if start is None:
        start = _only_llm_node(text, texts)
    return Agent(path, start, llm=ScriptedModel([]))


def _yaml_texts(folder: Path) -> list[str]:
    files = sorted([*folder.rglob("*.yaml"), *folder.rglob("*.yml")])
    return [f.read_text(encoding="utf-8") for f in files]


def _only_llm_node(text: str, texts: list[str]) -> str:
    names = sorted({n for t in texts for n in _llm_names(t)})
    if len(names) == 1:
        return names[0]
    which = f"it has {', '.join(names)}" if names else "it has no LLMNode to start at"
    raise GraphConfigError(
        f"Target {text!r} is a folder of agent specs; name the start LLMNode as "
        f"'{text}:NAME' ({which})."
    )


def _llm_names(text: str) -> list[str]:
    """The names of a spec file's LLMNodes; none when it does not parse (``Agent`` says why).

    Raises:
        GraphConfigError: PyYAML is not installed.
    """
    try:
        import yaml
    except ImportError:
        # Raised here, not left to Agent: with no names found, the caller would report a
        # folder without an LLMNode, and hide the extra to install.
        raise GraphConfigError(
            "Reading agent specs needs PyYAML, which is not installed; run "
            "pip install 'nodestep[yaml]'."
        ) from None
    try:
        docs = list(yaml.safe_load_all(text))
    except yaml.YAMLError:
        return []
    return [
        str(d["name"])
        for d in docs
        if isinstance(d, dict) and d.get("kind") == "LLMNode" and "name" in d
    ]
