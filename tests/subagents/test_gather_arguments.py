"""``ctx.gather`` takes the list of handles ``ctx.spawn`` returned; one handle alone is
refused with the fix, not Python's "object is not iterable"."""

from __future__ import annotations

from nodestep import END, START, AgentTask, BaseState, Graph, NodeContext, node


class Research(BaseState):
    topic: str = ""


@node
async def research(state: Research) -> dict:
    return {"topic": state.topic + "!"}


researcher = Graph(Research, name="researcher").flow(START >> research, research >> END)


def test_gather_given_one_handle_says_to_pass_a_list() -> None:
    seen: list[str] = []

    @node
    async def one(state: Research, ctx: NodeContext) -> dict:
        handles = await ctx.spawn([AgentTask(researcher, input={"topic": "tea"})])
        try:
            await ctx.gather(handles[0])  # type: ignore[arg-type]
        except TypeError as error:
            seen.append(str(error))
        (result,) = await ctx.gather(handles)
        return {"topic": result.state.topic}  # type: ignore[union-attr]

    assert Graph(Research).flow(START >> one, one >> END).invoke({}).state.topic == "tea!"
    assert seen == [
        "ctx.gather takes the list of handles ctx.spawn returned, got the one handle "
        "'researcher#0'; pass a list, e.g. ctx.gather([handle]), and read its result as "
        "results[0]."
    ]
