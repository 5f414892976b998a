"""A chat model that replies from a script: for tests, examples and benchmarks.

Which reply comes next is read from the conversation, not from a counter in the model:
the n-th reply answers a conversation holding n - 1 assistant messages. So a thread that
is resumed in another process, forked, or replayed from an earlier step gets the reply
its conversation is at, and the same inputs always give the same history.

Counting a long conversation's messages in Python at every call would make each turn cost
more than the one before, so the model keeps the count of the last few conversations it
was asked about: a conversation that starts with one of them (a list comparison, which
costs a pointer comparison for each message that is the same object) counts only the
messages after it. A conversation equal to a kept one holds as many assistant messages,
so the count never depends on what was kept, only its cost does.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

from nodestep._display.text import fields_repr, plural
from nodestep._errors import GraphConfigError, ModelError
from nodestep._state.json import first_at, unencodable
from nodestep.agents._messages import AssistantMessage, TokenUsage, ToolCall
from nodestep.agents._models import MessageChunk, ToolCallChunk

__all__ = ["ScriptedModel", "ScriptedReply"]

_TOKEN = re.compile(r"\s*\S+|\s+")
_KEPT = 8
"""How many conversations a model keeps the count of: each call of one looks at them all."""


@dataclass(frozen=True)
class ScriptedReply:
    """One reply of a script, and what the conversation must hold when it is given.

    Attributes:
        content: The reply's text.
        tool_calls: The tool calls: ``ToolCall``s, or ``(name, args)`` pairs. A call
            without an id gets ``call-<reply>-<index>``, both counted from 1.
        expect: Text the last message of the conversation must contain, or ``None``.
        usage: The tokens the reply reports: a ``TokenUsage`` or an ``(input, output)``
            pair; ``None`` counts words (see ``ScriptedModel``).
        finish_reason: The reason the reply reports; ``None`` gives ``"tool_calls"``
            when it calls tools, else ``"stop"``.
    """

    content: str = ""
    tool_calls: Sequence[ToolCall | tuple[str, Mapping[str, Any]]] = field(default=())
    expect: str | None = None
    usage: TokenUsage | tuple[int, int] | None = None
    finish_reason: str | None = None

    def __repr__(self) -> str:
        return fields_repr(self, ("content", "tool_calls", "expect"))


class ScriptedModel:
    """A chat model that gives the replies of a script, checked in order.

    Each reply reports token usage as a real model does, so cost reports and traces can
    be tested offline: the ``usage`` its script gives, or else one token per word
    (text split at whitespace): the input is the words of every message sent (a tool
    call counts its name and its JSON arguments), the output the reply's. Its
    ``finish_reason`` is the script's, or ``"tool_calls"`` when it calls tools, else
    ``"stop"``.

    Args:
        script: The replies: strings, ``AssistantMessage``s or ``ScriptedReply``s.
        name: The model's name, in errors.

    Raises:
        GraphConfigError: a reply or a tool call of a kind the script does not take, or
            a reply no model could send: a lone surrogate in its text, a tool call's name
            or args, or args without a JSON form (naming the reply, the call and the place).

    Attributes:
        calls: Every conversation the model was asked about, in this process.
        tool_choices: The ``tool_choice`` of each of those calls (``None``: not given).
    """

    def __init__(
        self, script: Sequence[str | AssistantMessage | ScriptedReply], *, name: str = "scripted"
    ) -> None:
        if isinstance(script, str) or not isinstance(script, Sequence):
            raise GraphConfigError(
                f"ScriptedModel takes a list of replies, got {type(script).__name__}; write "
                f"ScriptedModel(['first reply', ScriptedReply(tool_calls=[...]), ...])."
            )
        self.name = name
        self._replies = [self._reply(item, n) for n, item in enumerate(script, start=1)]
        # Each reply's own words, its output tokens: counted once, not at every call.
        self._output = [_words([reply]) for reply in self._replies]
        self._expects = [
            item.expect if isinstance(item, ScriptedReply) else None for item in script
        ]
        self.calls: list[list[Any]] = []
        self.tool_choices: list[str | None] = []
        # (conversation, assistant messages in it, words in it)
        self._counted: deque[tuple[list[Any], int, int]] = deque(maxlen=_KEPT)

    provider = "nodestep.scripted"
    """The provider's name on a model call's span (``gen_ai.provider.name``)."""

    def __repr__(self) -> str:
        replies, calls = plural(len(self._replies), "reply"), plural(len(self.calls), "call")
        return f"ScriptedModel(name={self.name!r}, {replies.replace('replys', 'replies')}, {calls})"

    def _reply(self, item: object, n: int) -> AssistantMessage:
        reply = self._made(item, n)
        _check_sendable(reply, n)
        return reply

    def _made(self, item: object, n: int) -> AssistantMessage:
        if isinstance(item, str):
            return AssistantMessage(content=item)
        if isinstance(item, AssistantMessage):
            return item
        if isinstance(item, ScriptedReply):
            calls = [self._call(call, n, i) for i, call in enumerate(item.tool_calls, start=1)]
            usage = item.usage
            if isinstance(usage, tuple):
                usage = TokenUsage(input_tokens=usage[0], output_tokens=usage[1])
            return AssistantMessage(
                content=item.content,
                tool_calls=tuple(calls),
                usage=usage,
                finish_reason=item.finish_reason,
            )
        raise GraphConfigError(
            f"Reply {n} of the script is a {type(item).__name__}; a reply is a string, an "
            f"AssistantMessage or a ScriptedReply."
        )

    @staticmethod
    def _call(call: object, n: int, i: int) -> ToolCall:
        if isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], str):
            call = ToolCall(name=call[0], args=dict(call[1]))
        if not isinstance(call, ToolCall):
            raise GraphConfigError(
                f"Tool call {i} of reply {n} of the script is {call!r}; write a ToolCall or "
                f"a (name, args) pair such as ('search', {{'query': 'tea'}})."
            )
        return call if call.id else call.model_copy(update={"id": f"call-{n}-{i}"})

    def _replied(self, messages: list[Any]) -> tuple[int, int]:
        """Return how many assistant messages and words ``messages`` holds (see the
        module's doc)."""
        count: int
        for seen, count, words in reversed(self._counted):
            n = len(seen)
            if n <= len(messages) and messages[:n] == seen:
                rest = messages[n:]
                return count + _assistants(rest), words + _words(rest)
        return _assistants(messages), _words(messages)

    def _next(self, messages: Sequence[Any], tool_choice: str | None) -> AssistantMessage:
        conversation = list(messages)
        self.calls.append(conversation)
        self.tool_choices.append(tool_choice)
        turn, words = self._replied(conversation)
        self._counted.append((conversation, turn, words))
        if turn >= len(self._replies):
            raise ModelError(
                f"Scripted model {self.name!r} was asked for reply {turn + 1}, but its script "
                f"has {len(self._replies)}. Add replies to the script, or check why the "
                f"graph asks the model again (a tool call that loops, say).",
                model=self.name,
            )
        expect = self._expects[turn]
        last = messages[-1] if messages else None
        if expect is not None and expect not in str(getattr(last, "content", "")):
            raise ModelError(
                f"Scripted model {self.name!r}, reply {turn + 1}: the last message should "
                f"contain {expect!r}, but it is {last!r}. The graph sent the model something "
                f"else than the script expects: fix the graph, or the script's expect=.",
                model=self.name,
            )
        reply = self._replies[turn]
        _check_choice(self.name, turn + 1, reply, tool_choice)
        return _reported(reply, words, self._output[turn])

    async def complete(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | None = None,
    ) -> AssistantMessage:
        """Return the script's next reply for this conversation.

        Raises:
            ModelError: the script has no reply left, the last message is not what the
                reply's ``expect`` says, or the reply breaks ``tool_choice`` (calls a tool
                under ``"none"``, none under ``"required"``, another under a tool's name),
                as a real model would not.
        """
        return self._next(messages, tool_choice)

    async def stream(
        self,
        messages: Sequence[Any],
        tools: Sequence[dict[str, Any]] = (),
        tool_choice: str | None = None,
    ) -> AsyncIterator[MessageChunk]:
        """Yield the script's next reply word by word, then each tool call whole; the last
        chunk carries the reply's ``usage`` and ``finish_reason``.

        Raises:
            ModelError: as ``complete``.
        """
        reply = self._next(messages, tool_choice)
        chunks = [MessageChunk(content=token) for token in _TOKEN.findall(reply.content)]
        for index, call in enumerate(reply.tool_calls):
            args = orjson.dumps(call.args).decode()
            piece = ToolCallChunk(index=index, id=call.id, name=call.name, args=args)
            chunks.append(MessageChunk(tool_call_chunks=(piece,)))
        # The last chunk says how the reply ended, as a server's last chunk does.
        ending = {"usage": reply.usage, "finish_reason": reply.finish_reason}
        if chunks:
            chunks[-1] = chunks[-1].model_copy(update=ending)
        else:
            chunks.append(MessageChunk(**ending))
        for chunk in chunks:
            yield chunk


def _check_sendable(reply: AssistantMessage, n: int) -> None:
    """Refuse reply ``n`` of a script if no model could send it: text that UTF-8 cannot
    encode (a lone surrogate), or tool call arguments without a JSON form.

    Why when the script is given: else the reply fails where a model call counts its
    words or streams its arguments, or where the run stores it, as a bare encoding error
    far from the script.

    Raises:
        GraphConfigError: naming the reply, the call, the place in it, and the fix.
    """
    texts = [("its content", reply.content)]
    for i, call in enumerate(reply.tool_calls, start=1):
        of = f"tool call {i} ({call.name!r})"
        texts += [(f"the name of {of}", call.name), (f"the id of {of}", call.id)]
        try:
            orjson.dumps(call.args)
        except TypeError as error:
            raise _bad_args(n, of, call.args, error) from None
    for label, text in texts:
        bad = None if text.isascii() else unencodable(text)
        if bad is not None:
            held = f"{label} holds the lone surrogate {bad!r} at index {text.index(str(bad))}"
            raise _surrogate(n, held)


def _bad_args(n: int, of: str, args: dict[str, Any], error: TypeError) -> GraphConfigError:
    """Return the error for the args of ``of`` in reply ``n``, which orjson refused."""
    found = first_at(args, "args", unencodable)
    if found is None:  # a value of a type JSON has not, such as a set
        return GraphConfigError(
            f"Reply {n} of the script: the args of {of} have no JSON form ({error}), so no "
            f"model could send them. Write the args as JSON data: dicts, lists, str, "
            f"numbers, bools and None."
        )
    where, bad = found
    if isinstance(bad, int):
        return GraphConfigError(
            f"Reply {n} of the script: {where} of {of} is the int {bad}, beyond 64 bits, "
            f"which no model's JSON holds. Keep integers within 64 bits (write bigger ones "
            f"as strings)."
        )
    return _surrogate(n, f"{where} of {of} holds the lone surrogate {bad!r}")


def _surrogate(n: int, held: str) -> GraphConfigError:
    return GraphConfigError(
        f"Reply {n} of the script: {held} (half of a UTF-16 pair, such as a cut emoji), "
        f"which UTF-8 cannot encode, so no model could send it. Write whole characters in "
        f"the script, e.g. text.encode('utf-8', 'replace').decode() turns it into '?'."
    )


def _check_choice(model: str, n: int, reply: AssistantMessage, choice: str | None) -> None:
    """Refuse a scripted reply that a model told ``tool_choice=choice`` could not give."""
    if choice is None or choice == "auto":  # the usual call: any reply fits
        return
    names = [call.name for call in reply.tool_calls]
    if choice == "none" and names:
        broken = f"calls {', '.join(names)}, but tool_choice='none' forbids tool calls"
    elif choice == "required" and not names:
        broken = "calls no tool, but tool_choice='required' asks for a call"
    elif choice not in ("none", "required") and set(names) != {choice}:
        broken = f"calls {names or 'no tool'}, but tool_choice={choice!r} asks for that tool"
    else:
        return
    raise ModelError(
        f"Scripted model {model!r}, reply {n}: the reply {broken}. Change the script, or the "
        f"tool_choice= of the node.",
        model=model,
    )


def _assistants(messages: list[Any]) -> int:
    return sum(1 for m in messages if getattr(m, "role", None) == "assistant")


def _words(messages: list[Any]) -> int:
    """Count the words of ``messages``: their text, and their tool calls' names and
    JSON arguments."""
    total = 0
    for message in messages:
        total += len(str(getattr(message, "content", "")).split())
        # Only a reply calls tools: asking another message for tool_calls raises inside
        # pydantic's __getattr__, which costs more than the count.
        if isinstance(message, AssistantMessage):
            for call in message.tool_calls:
                total += 1 + len(orjson.dumps(call.args).split())
    return total


# TokenUsage's validator itself: its __init__ is a Python frame around it (about 2.6k
# instructions, two a turn of W10's agent).
_new_usage = TokenUsage.__pydantic_validator__.validate_python


def _reported(reply: AssistantMessage, words: int, output: int) -> AssistantMessage:
    """Return ``reply`` with its usage and finish reason (``words``: the input's, ``output``:
    the reply's)."""
    if reply.usage is not None and reply.finish_reason is not None:
        return reply
    usage = reply.usage
    if usage is None:
        # With its total, which TokenUsage's validator would otherwise add in a new dict.
        usage = _new_usage(
            {"input_tokens": words, "output_tokens": output, "total_tokens": words + output}
        )
    reason = reply.finish_reason or ("tool_calls" if reply.tool_calls else "stop")
    return reply.model_copy(update={"usage": usage, "finish_reason": reason})
