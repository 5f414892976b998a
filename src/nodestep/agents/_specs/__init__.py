"""Agents from a folder of specs: Liman's manifest kinds, run durably by ``Agent``.

The modules, in the order a folder travels through them:

- ``bundles``: language bundles (``system: {en: ..., ru: ...}``), with ``en`` as the
  fallback key by key;
- ``arguments``: a ToolNode's declared arguments, as a JSON schema and a checking model;
- ``functions``: what a ``func:`` string names (``functions=``, then an import);
- ``manifests``: the folder read into typed specs, every problem at its file and line;
- ``prompts``: the system prompt of an LLMNode, with its tools listed;
- ``routing``: the ``when:`` of an edge, evaluated on the call's context;
- ``records``: what the agent keeps in its thread (conversations, node records);
- ``steps``: the node functions; ``building``: the ``Graph`` made of them;
- ``streaming``: what a streamed step yields (tokens, tool calls, tool results);
- ``agent``: ``Agent``, ``AgentStep`` and ``NodeState``.
"""
