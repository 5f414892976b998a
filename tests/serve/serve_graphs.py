"""The graphs the serve tests serve: a chat, an approval, three steps, a failure, a slow one."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Annotated, Any

import anyio
from pydantic import Field

from nodestep import (
    END,
    START,
    BaseState,
    Graph,
    MessagesState,
    NodeContext,
    add,
    interrupt,
    model_node,
    node,
)
from nodestep.agents import AssistantMessage, MessageChunk


class EchoModel:
    """A chat model that answers ``echo: <the last message>``, a word per chunk."""

    name = "echo"

    def _words(self, messages: Sequence[Any]) -> list[str]:
        return f"echo: {messages[-1].content}".split(" ")

    async def complete(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]]
    ) -> AssistantMessage:
        return AssistantMessage(content=" ".join(self._words(messages)))

    async def stream(
        self, messages: Sequence[Any], tools: Sequence[dict[str, Any]]
    ) -> AsyncIterator[MessageChunk]:
        words = self._words(messages)
        for n, word in enumerate(words):
            yield MessageChunk(content=word if n == 0 else " " + word)


chat_node = model_node(EchoModel())
chat = Graph(MessagesState, name="chat").flow(START >> chat_node, chat_node >> END)


class Approval(BaseState):
    request: str = ""
    answer: str = ""
    done: bool = False


@node
def ask(state: Approval) -> dict[str, Any]:
    return {"answer": interrupt({"question": f"approve {state.request}?"}, id="approve")}


@node
def finish(state: Approval) -> dict[str, Any]:
    return {"done": True}


approval = Graph(Approval, name="approval").flow(START >> ask, ask >> finish, finish >> END)


class Steps(BaseState):
    n: int = 0
    log: Annotated[list[str], add] = Field(default_factory=list)


@node
def one(state: Steps, ctx: NodeContext) -> dict[str, Any]:
    ctx.emit({"progress": "one"})
    return {"n": state.n + 1, "log": ["one"]}


@node
def two(state: Steps) -> dict[str, Any]:
    return {"n": state.n + 1, "log": ["two"]}


@node
def three(state: Steps) -> dict[str, Any]:
    return {"n": state.n + 1, "log": ["three"]}


steps = Graph(Steps, name="steps").flow(START >> one, one >> two, two >> three, three >> END)


class Job(BaseState):
    seconds: float = 0.0
    runs: Annotated[list[str], add] = Field(default_factory=list)


@node
async def work(state: Job) -> dict[str, Any]:
    await anyio.sleep(state.seconds)
    return {"runs": ["worked"]}


slow = Graph(Job, name="slow").flow(START >> work, work >> END)


class Broken(BaseState):
    x: int = 0


@node
def explode(state: Broken) -> dict[str, Any]:
    raise ValueError(f"x was {state.x}")


broken = Graph(Broken, name="broken").flow(START >> explode, explode >> END)


class Greeting(BaseState):
    text: str = ""


@node
def greet(state: Greeting, ctx: NodeContext) -> dict[str, Any]:
    return {"text": f"hello {ctx.context['name']}"}


greeting = Graph(Greeting, name="greeting").flow(START >> greet, greet >> END)


class Note(BaseState):
    user: str = ""
    text: str = ""
    count: int = 0


@node
async def remember(state: Note, ctx: NodeContext) -> dict[str, Any]:
    namespace = ("notes", state.user)
    await ctx.memory.put(namespace, "last", {"text": state.text})
    return {"count": len(await ctx.memory.search(namespace))}


notes = Graph(Note, name="notes").flow(START >> remember, remember >> END)

inner = Graph(Steps, name="inner").flow(START >> two, two >> END)
outer = Graph(Steps, name="outer").flow(START >> one, one >> inner, inner >> END)

GRAPHS = {g.name: g for g in (chat, approval, steps, slow, broken, greeting, outer, notes)}
