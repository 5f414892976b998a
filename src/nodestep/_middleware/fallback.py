"""``ModelFallback``: when a model call fails, try the next model of a list."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep.agents import ChatModel, ModelMiddlewareContext

__all__ = ["ModelFallback"]


class ModelFallback(Middleware):
    """Send a failed model call to the next model of ``models``, in order.

    Each model is tried at most once per call; when the last fails too, its error fails
    the node (with the node's ``RetryPolicy``, if any, after that).

    Args:
        models: The models to fall back to, in order.
        when: Which errors to fall back on; every ``Exception`` by default, e.g.
            ``retryable_model_error`` for 429s, 5xx and lost connections only.

    Raises:
        GraphConfigError: ``models`` is empty or holds something that is not a chat model.
    """

    def __init__(
        self, models: Sequence[ChatModel], *, when: Callable[[BaseException], bool] | None = None
    ) -> None:
        found = list(models)
        if not found or not all(isinstance(m, ChatModel) for m in found):
            raise GraphConfigError(
                f"ModelFallback takes a list of chat models to try in order, got {models!r}; "
                f"e.g. ModelFallback([OpenAIChatModel('gpt-4o-mini')])."
            )
        self.models = found
        self.when = when

    def on_model_error(self, ctx: ModelMiddlewareContext, error: Exception) -> Replacement | None:
        """Return the request sent to the next model not yet tried, or ``None``."""
        if ctx.request is None or (self.when is not None and not self.when(error)):
            return None
        for model in self.models:
            if model.name not in ctx.attempts:
                return ctx.replace(ctx.request.replace(model=model))
        return None

    def __repr__(self) -> str:
        return f"ModelFallback([{', '.join(repr(m.name) for m in self.models)}])"
