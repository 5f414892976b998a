"""``input_model=``: the input of an agent's runs, validated by a pydantic model first.

The check runs in ``invoke``, ``ainvoke``, ``stream`` and ``astream`` before the run
starts, so an input that does not fit is refused with nothing written to the thread.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Iterator, Sequence
from typing import Any, TypeVar, Unpack

from pydantic import BaseModel, ValidationError

from nodestep._engine.results import GraphResult, StreamEvent
from nodestep._errors import GraphConfigError, StateUpdateError
from nodestep._flow.routing import Command
from nodestep._graph.graph import Graph
from nodestep._graph.options import RunOptions

__all__ = ["InputCheckedGraph", "check_input_model"]

S = TypeVar("S", bound=BaseModel)


def check_input_model(input_model: object, state: type[BaseModel]) -> type[BaseModel]:
    """Return ``input_model`` once it is a pydantic model of fields of ``state``.

    Raises:
        GraphConfigError: it is not a ``BaseModel`` subclass, or has a field the state
            does not (the input would be refused by the state after passing it).
    """
    if not isinstance(input_model, type) or not issubclass(input_model, BaseModel):
        raise GraphConfigError(
            f"input_model={input_model!r} is not a pydantic model class: the input of each "
            f"run is validated by it. Pass a class derived from pydantic.BaseModel."
        )
    unknown = [name for name in input_model.model_fields if name not in state.model_fields]
    if unknown:
        raise GraphConfigError(
            f"input_model {input_model.__name__} has the fields {', '.join(unknown)}, which "
            f"the state {state.__name__} does not: the input becomes the state. Add them to "
            f"the state (subclass MessagesState), or leave them out of the input model."
        )
    return input_model


class InputCheckedGraph(Graph[S]):
    """A graph that validates the input of each run with its ``input_model`` first.

    A dict input is validated; the fields it sets are the run's input, as the model made
    them. ``None`` (continue a thread), a ``Command`` (answer an interrupt) and a whole
    state instance are not an input to check, and pass as they are.
    """

    def __init__(self, state: type[S], *, input_model: type[BaseModel], **options: Any) -> None:
        super().__init__(state, **options)
        self.input_model = input_model

    def _checked(self, input: dict[str, Any] | S | Command | None) -> Any:
        if not isinstance(input, dict):
            return input
        try:
            valid = self.input_model.model_validate(input)
        except ValidationError as error:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in d.get('loc', ())) or 'input'}: {d.get('msg')}"
                for d in error.errors(include_url=False)[:5]
            )
            raise StateUpdateError(
                f"The input of {self.name!r} does not fit its input model "
                f"{self.input_model.__name__}: {problems}. Pass an input that fits it; "
                f"nothing was written.",
                writer="input",
            ) from error
        return {name: getattr(valid, name) for name in valid.model_fields_set}

    async def ainvoke(
        self, input: dict[str, Any] | S | Command | None = None, **options: Unpack[RunOptions]
    ) -> GraphResult[S]:
        """Validate the input (see the class), then run as ``Graph.ainvoke``."""
        return await super().ainvoke(self._checked(input), **options)

    def invoke(
        self, input: dict[str, Any] | S | Command | None = None, **options: Unpack[RunOptions]
    ) -> GraphResult[S]:
        """Validate the input (see the class), then run as ``Graph.invoke``."""
        return super().invoke(self._checked(input), **options)

    def astream(
        self,
        input: dict[str, Any] | S | Command | None = None,
        *,
        stream_mode: str | Sequence[str],
        subgraphs: bool = False,
        **options: Unpack[RunOptions],
    ) -> AsyncGenerator[StreamEvent, None]:
        """Validate the input (see the class), then stream as ``Graph.astream``."""
        checked = self._checked(input)
        return super().astream(checked, stream_mode=stream_mode, subgraphs=subgraphs, **options)

    def stream(
        self,
        input: dict[str, Any] | S | Command | None = None,
        *,
        stream_mode: str | Sequence[str],
        subgraphs: bool = False,
        **options: Unpack[RunOptions],
    ) -> Iterator[StreamEvent]:
        """Validate the input (see the class), then stream as ``Graph.stream``."""
        checked = self._checked(input)
        return super().stream(checked, stream_mode=stream_mode, subgraphs=subgraphs, **options)
