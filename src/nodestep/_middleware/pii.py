"""``RedactPII``: mask e-mail addresses, card numbers, IPs and phone numbers for the model."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from nodestep._errors import GraphConfigError
from nodestep._flow.middleware import Middleware, Replacement
from nodestep.agents import ModelMiddlewareContext

__all__ = ["RedactPII"]

PATTERNS: dict[str, re.Pattern[str]] = {
    "email": re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b"),
    "credit_card": re.compile(r"\b(?:\d[ -]?){12,18}\d\b"),
    "ip": re.compile(r"\b(?:(?:25[0-5]|2[0-4]\d|1?\d?\d)\.){3}(?:25[0-5]|2[0-4]\d|1?\d?\d)\b"),
    # International (+44 20 7946 0958) or North American ((555) 123-4567) forms only: a
    # looser pattern would take order and invoice numbers for phone numbers.
    "phone": re.compile(
        r"(?<![\w+])(?:\+\d{1,3}(?:[ .-]?\(?\d{1,4}\)?){1,2}(?:[ .-]?\d{2,4}){2,3}"
        r"|\(?\b\d{3}\)?[ .-]\d{3}[ .-]\d{4})\b"
    ),
}


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        n = int(ch)
        if i % 2:
            n = n * 2 - 9 if n > 4 else n * 2
        total += n
    return total % 10 == 0


class RedactPII(Middleware):
    """Replace personal data in what the model reads and writes with ``[REDACTED_<KIND>]``.

    On input the request is masked (the stored conversation keeps the data: the model never
    sees it); on output the reply is masked before it is stored. A card number is masked
    only when its digits pass the Luhn check, so order numbers stay.

    Args:
        kinds: Which kinds to mask: ``"email"``, ``"credit_card"``, ``"ip"``, ``"phone"``;
            one kind may be given as a str.
        input: Mask the request's messages.
        output: Mask the model's reply.

    Raises:
        GraphConfigError: an unknown kind, or neither ``input`` nor ``output``.
    """

    def __init__(
        self,
        kinds: Sequence[str] = ("email", "credit_card", "ip", "phone"),
        *,
        input: bool = True,
        output: bool = True,
    ) -> None:
        if isinstance(kinds, str):  # one kind, not its letters
            kinds = [kinds]
        unknown = sorted(set(kinds) - set(PATTERNS))
        if unknown or not kinds:
            raise GraphConfigError(
                f"RedactPII got kinds {list(kinds)!r}; the kinds are {', '.join(PATTERNS)}."
            )
        if not input and not output:
            raise GraphConfigError("RedactPII masks nothing with input=False, output=False.")
        # The card pattern first: its digits would read as a phone number.
        self.kinds = [k for k in PATTERNS if k in kinds]
        self.input, self.output = input, output

    def redact(self, text: str) -> str:
        """Return ``text`` with each kind's matches masked."""
        for kind in self.kinds:
            pattern = PATTERNS[kind]
            if kind == "credit_card":
                text = pattern.sub(
                    lambda m: (
                        "[REDACTED_CREDIT_CARD]"
                        if _luhn(re.sub(r"\D", "", m.group()))
                        else m.group()
                    ),
                    text,
                )
            else:
                text = pattern.sub(f"[REDACTED_{kind.upper()}]", text)
        return text

    def _masked(self, message: Any) -> Any:
        content = getattr(message, "content", None)
        if not isinstance(content, str):
            return message
        masked = self.redact(content)
        return message if masked == content else message.model_copy(update={"content": masked})

    def before_model(self, ctx: ModelMiddlewareContext) -> Replacement | None:
        """Mask the request's messages."""
        if not self.input or ctx.request is None:
            return None
        messages = [self._masked(m) for m in ctx.request.messages]
        return ctx.replace(ctx.request.replace(messages=messages))

    def after_model(self, ctx: ModelMiddlewareContext) -> Replacement | None:
        """Mask the reply's text."""
        if not self.output or ctx.response is None:
            return None
        return ctx.replace(self._masked(ctx.response))

    def __repr__(self) -> str:
        return f"RedactPII({self.kinds!r}, input={self.input}, output={self.output})"
