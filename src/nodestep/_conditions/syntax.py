"""Parse a condition into a tree: the grammar of the ``when`` language.

::

    condition  := or
    or         := and (("or" | "||") and)*
    and        := not (("and" | "&&") not)*
    not        := "not" not | comparison
    comparison := unary (("==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not in") unary)?
    unary      := "!" unary | operand
    operand    := literal | list | name | name "(" args ")" | "$" IDENT "(" args ")"
                | "(" condition ")"

``&&`` and ``||`` are other spellings of ``and`` and ``or``. ``!`` negates one operand and
binds tighter than a comparison, as in C and JavaScript (``!done``, ``!(a == b)``), where
``not`` negates a whole comparison, as in Python.
    name       := IDENT ("." IDENT)*
    literal    := NUMBER | "-" NUMBER | STRING | "true" | "false" | "null"
    list       := "[" (condition ("," condition)*)? "]"

A hand-written recursive-descent parser: the language is small, the core install stays
free of a parser dependency, and parsing a seed-sized condition takes tens of
microseconds. Every failure is a ``Problem`` with the offset it is at; nothing else
escapes (nesting is capped so deep input cannot exhaust Python's stack).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, NoReturn

__all__ = [
    "BoolOp",
    "Call",
    "Compare",
    "Expr",
    "ListExpr",
    "Literal",
    "Name",
    "Not",
    "Problem",
    "parse",
]

MAX_DEPTH = 64
"""How deeply parentheses, lists, calls, ``not`` and ``!`` may nest."""

MAX_NUMBER = 100
"""How many characters a number may have: ``int()`` of a longer one is slow, and of one
over 4,300 digits refused by Python, so the parser refuses it first."""

KEYWORDS = frozenset({"and", "or", "not", "in", "true", "false", "null"})


class Problem(Exception):
    """A condition that does not parse or check: what is wrong and the fix, at ``offset``."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset


@dataclass(frozen=True, slots=True)
class Literal:
    """A number, string, ``true``, ``false`` or ``null``."""

    value: Any
    pos: int


@dataclass(frozen=True, slots=True)
class ListExpr:
    """``[a, b, ...]``, the right side of ``in``."""

    items: tuple[Expr, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Name:
    """A dotted name: ``status``, ``user.tier``, ``context.user.tier``."""

    parts: tuple[str, ...]
    pos: int

    @property
    def dotted(self) -> str:
        """The name as written."""
        return ".".join(self.parts)


@dataclass(frozen=True, slots=True)
class Call:
    """``$builtin(args)`` or ``registered.function(args)``; ``args`` is ``None`` for a bare
    reference to a registered function (``business_rules.validate``)."""

    name: str
    args: tuple[Expr, ...] | None
    builtin: bool
    pos: int


@dataclass(frozen=True, slots=True)
class Not:
    """``not operand`` or ``!operand``; ``word`` is the spelling, for messages."""

    operand: Expr
    pos: int
    word: str = "not"


@dataclass(frozen=True, slots=True)
class BoolOp:
    """``a and b and ...`` or ``a or b or ...``."""

    op: str
    operands: tuple[Expr, ...]
    pos: int


@dataclass(frozen=True, slots=True)
class Compare:
    """``left op right``: ``==``, ``!=``, ``<``, ``<=``, ``>``, ``>=``, ``in``, ``not in``."""

    op: str
    left: Expr
    right: Expr
    pos: int


Expr = Literal | ListExpr | Name | Call | Not | BoolOp | Compare

_TOKEN = re.compile(
    r"""
    (?P<space>\s+)
  | (?P<number>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)
  | (?P<string>'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*")
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>==|!=|<=|>=|&&|\|\||!|<|>|\(|\)|\[|\]|,|\.|\$|-)
    """,
    re.VERBOSE,
)

_ESCAPES = {"n": "\n", "t": "\t", "\\": "\\", "'": "'", '"': '"'}

# Operators people bring from other languages, each with the one to write instead.
# (``&&``, ``||`` and ``!`` are part of the language.)
_HINTS = {
    "=": "compare with '==' (a condition never assigns)",
}


@dataclass(frozen=True, slots=True)
class _Tok:
    kind: str  # number, string, ident, op, end
    text: str
    pos: int


def _tokens(text: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None:
            _bad_character(text, pos)
        kind = m.lastgroup or ""
        if kind != "space":
            out.append(_Tok(kind, m.group(), pos))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


def _bad_character(text: str, pos: int) -> NoReturn:
    for op, hint in _HINTS.items():
        if text.startswith(op, pos):
            raise Problem(f"unexpected '{op}': {hint}", pos)
    ch = text[pos]
    if ch in "'\"":
        raise Problem(f"the string opened here has no closing {ch}; close it on the same line", pos)
    raise Problem(
        f"unexpected character {ch!r}; a condition has names, numbers, 'strings', "
        f"comparisons, and/or/not, parentheses and $builtins()",
        pos,
    )


def _unquote(token: str, pos: int) -> str:
    body = token[1:-1]
    out: list[str] = []
    i = 0
    while i < len(body):
        ch = body[i]
        if ch == "\\":
            nxt = body[i + 1]  # the token pattern guarantees a character after a backslash
            if nxt not in _ESCAPES:
                raise Problem(
                    f"unknown escape '\\{nxt}' in a string; the escapes are \\n \\t \\\\ \\' \\\"",
                    pos + 1 + i,
                )
            out.append(_ESCAPES[nxt])
            i += 2
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def parse(text: str) -> Expr:
    """Parse ``text`` into a tree.

    Raises:
        Problem: the text is not a condition; it says what and where.
    """
    parser = _Parser(_tokens(text))
    tree = parser.condition(0)
    end = parser.peek()
    if end.kind != "end":
        raise Problem(
            f"unexpected {_shown(end)} after a complete condition; join conditions with "
            f"'and' or 'or'",
            end.pos,
        )
    return tree


def _shown(tok: _Tok) -> str:
    return "end of the condition" if tok.kind == "end" else f"'{tok.text}'"


_COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})

# The other spellings of the boolean words. ``!`` is not one of them: it binds tighter.
_SPELLINGS = {"&&": "and", "||": "or"}


class _Parser:
    def __init__(self, tokens: list[_Tok]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self) -> _Tok:
        return self.tokens[self.i]

    def take(self) -> _Tok:
        tok = self.tokens[self.i]
        self.i += 1
        return tok

    def at(self, text: str) -> bool:
        tok = self.tokens[self.i]
        if tok.kind == "op":
            return tok.text == text or _SPELLINGS.get(tok.text) == text
        return tok.text == text and tok.kind == "ident"

    def expect(self, text: str, why: str) -> _Tok:
        tok = self.peek()
        if not self.at(text):
            raise Problem(f"expected '{text}' {why}, found {_shown(tok)}", tok.pos)
        return self.take()

    def condition(self, depth: int) -> Expr:
        if depth > MAX_DEPTH:
            raise Problem(
                f"the condition nests deeper than {MAX_DEPTH} levels; split it into named "
                f"steps or a registered function",
                self.peek().pos,
            )
        return self.boolean("or", depth)

    def boolean(self, op: str, depth: int) -> Expr:
        first = self.peek().pos
        operands = [self.boolean("and", depth) if op == "or" else self.negation(depth)]
        while self.at(op):
            self.take()
            operands.append(self.boolean("and", depth) if op == "or" else self.negation(depth))
        return operands[0] if len(operands) == 1 else BoolOp(op, tuple(operands), first)

    def negation(self, depth: int) -> Expr:
        if self.at("not"):
            tok = self.take()
            if depth > MAX_DEPTH:
                raise Problem(f"more than {MAX_DEPTH} nested 'not'", tok.pos)
            return Not(self.negation(depth + 1), tok.pos)
        return self.comparison(depth)

    def comparison(self, depth: int) -> Expr:
        left = self.operand(depth)
        tok = self.peek()
        if (tok.kind == "op" and tok.text in _COMPARISONS) or self.at("in"):
            op = self.take().text
        elif tok.text == "not" and tok.kind == "ident" and self.tokens[self.i + 1].text == "in":
            self.i += 2
            op = "not in"
        else:
            return left
        right = self.operand(depth)
        nxt = self.peek()
        if (nxt.kind == "op" and nxt.text in _COMPARISONS) or self.at("in"):
            raise Problem(f"comparisons do not chain; write 'a {op} b and b {nxt.text} c'", nxt.pos)
        return Compare(op, left, right, tok.pos)

    def operand(self, depth: int) -> Expr:
        tok = self.take()
        if tok.text == "!" and tok.kind == "op":
            if depth > MAX_DEPTH:
                raise Problem(f"more than {MAX_DEPTH} nested '!'", tok.pos)
            return Not(self.operand(depth + 1), tok.pos, "!")
        if tok.kind == "number":
            return Literal(_number(tok), tok.pos)
        if tok.kind == "string":
            return Literal(_unquote(tok.text, tok.pos), tok.pos)
        if tok.text == "-" and self.peek().kind == "number":
            return Literal(-_number(self.take()), tok.pos)
        if tok.kind == "ident":
            return self.word(tok, depth)
        if tok.text == "(":
            inner = self.condition(depth + 1)
            self.expect(")", "to close the '(' opened before")
            return inner
        if tok.text == "[":
            return self.list_literal(tok, depth)
        if tok.text == "$":
            name = self.take()
            if name.kind != "ident":
                raise Problem(
                    f"'$' starts a built-in such as $len(x); found {_shown(name)} after it",
                    name.pos,
                )
            args = self.arguments(depth) if self.at("(") else None
            if args is None:
                raise Problem(
                    f"built-in ${name.text} needs parentheses: ${name.text}(...)", self.peek().pos
                )
            return Call(name.text, args, True, tok.pos)
        raise Problem(
            f"expected a value (a name, number, 'string', true/false/null, a list or "
            f"'('), found {_shown(tok)}",
            tok.pos,
        )

    def word(self, tok: _Tok, depth: int) -> Expr:
        literals = {"true": True, "false": False, "null": None}
        if tok.text in literals:
            return Literal(literals[tok.text], tok.pos)
        if tok.text in KEYWORDS:
            raise Problem(f"expected a value, found the keyword '{tok.text}'", tok.pos)
        if tok.text in ("True", "False", "None"):
            lower = {"True": "true", "False": "false", "None": "null"}[tok.text]
            raise Problem(f"write '{lower}', not '{tok.text}'", tok.pos)
        parts = [tok.text]
        while self.at("."):
            self.take()
            part = self.take()
            if part.kind != "ident":
                raise Problem(f"expected a name after '.', found {_shown(part)}", part.pos)
            parts.append(part.text)
        if self.at("("):
            # The arguments nest one level deeper than the call, as a built-in's do.
            return Call(".".join(parts), self.arguments(depth), False, tok.pos)
        return Name(tuple(parts), tok.pos)

    def arguments(self, depth: int) -> tuple[Expr, ...]:
        self.take()  # "("
        args: list[Expr] = []
        if not self.at(")"):
            args.append(self.condition(depth + 1))
            while self.at(","):
                self.take()
                args.append(self.condition(depth + 1))
        self.expect(")", "to close the argument list")
        return tuple(args)

    def list_literal(self, tok: _Tok, depth: int) -> ListExpr:
        items: list[Expr] = []
        if not self.at("]"):
            items.append(self.condition(depth + 1))
            while self.at(","):
                self.take()
                items.append(self.condition(depth + 1))
        self.expect("]", "to close the list")
        return ListExpr(tuple(items), tok.pos)


def _number(tok: _Tok) -> int | float:
    text = tok.text
    if len(text) > MAX_NUMBER:
        raise Problem(
            f"a number of more than {MAX_NUMBER} characters ({len(text)}); compare with a "
            f"shorter one, or compute the value in a registered function",
            tok.pos,
        )
    if any(c in text for c in ".eE"):
        return float(text)
    return int(text)
