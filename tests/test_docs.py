"""Run the code in the documentation.

Every fenced ```python block in ``docs/*.md`` and ``README.md`` is one test item, with an
id of the form ``persistence.md:42`` (the page and the line of the opening fence).

- A block is executed in-process, in a fresh ``__main__`` module of its own (blocks on the
  same page share nothing), with stdout captured and the working directory set to an
  empty temporary directory.
- If the next fenced block after it (blank lines in between are allowed) is a ```text
  block, the captured stdout must equal that block's text. One trailing newline is
  ignored on each side.
- A block opened with ```python no-run is not executed (signatures, fragments).
- Blocks opened with ```python notebook are the cells of one notebook: a page's cells run
  in order in one namespace, each inside a running asyncio event loop with ``await``
  allowed at the top level, as Jupyter runs them. Each cell's output is compared as above;
  the page is one test item, ``notebooks.md:notebook``.
- A block opened with ```python postgres needs a PostgreSQL server: it runs with
  ``DATABASE_URL`` set to a new, empty database of the tests' server (see
  ``tests/postgres_server.py``), and skips without one, as the other PostgreSQL tests do.
- A block opened with ```python slow takes more than about a quarter of a second (a
  server, a child process): its test item is marked slow, so ``-m "not slow"`` leaves it
  out. Flags combine (```python postgres slow).
- Blocks in any other language (mermaid, bash, text on its own, ...) are ignored.

Code raised from a block keeps the page's file name and line numbers in its traceback,
and the failure report ends with the whole block.
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import re
import sys
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from postgres_server import throwaway_database

ROOT = Path(__file__).resolve().parent.parent
PYTHON_LANGS = {"python", "python3", "py"}

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>.*)$")


@dataclass(frozen=True)
class Fence:
    """One fenced code block of a markdown file."""

    lang: str
    flags: tuple[str, ...]
    line: int  # 1-based line of the opening fence
    body: str  # the lines between the fences, each ending in a newline
    end_line: int  # 1-based line of the closing fence (or the last line if unclosed)


@dataclass(frozen=True)
class DocBlock:
    """A python block to run, with the output it must print (None: not checked)."""

    path: Path
    line: int
    code: str
    expected: str | None
    notebook: bool = False
    postgres: bool = False
    slow: bool = False

    @property
    def test_id(self) -> str:
        return f"{self.path.name}:{self.line}"


def parse_fences(text: str) -> list[Fence]:
    """Return the fenced code blocks of a markdown text, in order.

    Close to CommonMark: a fence is three or more backticks or tildes; it is closed by a
    line of the same character at least as long, with nothing else on it. Unlike
    CommonMark, a fence may be indented by any number of spaces (so that no block inside a
    list escapes testing), and the opening fence's indentation is removed from the body.
    """
    lines = text.splitlines()
    fences: list[Fence] = []
    i = 0
    while i < len(lines):
        match = _FENCE.match(lines[i])
        if match is None or (match["fence"][0] == "`" and "`" in match["info"]):
            i += 1
            continue
        marker, indent = match["fence"], len(match["indent"])
        words = match["info"].split()
        lang = words[0].lower() if words else ""
        closing = re.compile(rf"^ *{re.escape(marker[0])}{{{len(marker)},}}\s*$")
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not closing.match(lines[j]):
            line = lines[j]
            strip = min(indent, len(line) - len(line.lstrip(" ")))
            body.append(line[strip:] + "\n")
            j += 1
        fences.append(
            Fence(
                lang=lang,
                flags=tuple(words[1:]),
                line=i + 1,
                body="".join(body),
                end_line=min(j, len(lines) - 1) + 1,
            )
        )
        i = j + 1
    return fences


def doc_blocks(path: Path, text: str) -> list[DocBlock]:
    """The python blocks of one page that are to be run, each with its expected output."""
    lines = text.splitlines()
    fences = parse_fences(text)
    blocks: list[DocBlock] = []
    for index, fence in enumerate(fences):
        if fence.lang not in PYTHON_LANGS or "no-run" in fence.flags:
            continue
        expected = None
        following = fences[index + 1] if index + 1 < len(fences) else None
        if following is not None and following.lang == "text":
            between = lines[fence.end_line : following.line - 1]
            if all(not line.strip() for line in between):
                expected = following.body
        notebook = "notebook" in fence.flags
        postgres = "postgres" in fence.flags
        slow = "slow" in fence.flags
        blocks.append(DocBlock(path, fence.line, fence.body, expected, notebook, postgres, slow))
    return blocks


def collect() -> list[DocBlock]:
    pages = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
    blocks: list[DocBlock] = []
    for page in pages:
        if page.is_file():
            blocks.extend(doc_blocks(page, page.read_text(encoding="utf-8")))
    return blocks


def notebooks() -> dict[str, list[DocBlock]]:
    """The notebook cells of every page that has some, by page name, in order."""
    pages: dict[str, list[DocBlock]] = {}
    for block in collect():
        if block.notebook:
            pages.setdefault(block.path.name, []).append(block)
    return pages


def _strip_one_newline(text: str) -> str:
    return text[:-1] if text.endswith("\n") else text


def _numbered(block: DocBlock) -> str:
    rows = block.code.splitlines()
    width = len(str(block.line + len(rows)))
    numbered = [f"{block.line + n:>{width}} | {row}" for n, row in enumerate(rows, start=1)]
    return "\n".join([f"{_shown(block.path)}:{block.line}", *numbered])


def _shown(path: Path) -> str:
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def run_block(block: DocBlock) -> str:
    """Execute a block as the script ``__main__`` and return what it printed.

    Like ``runpy``, the fresh module is put in ``sys.modules["__main__"]`` while the block
    runs, so that pydantic models, dataclasses and pickle find the names the block defines.
    """
    # Padding with blank lines makes traceback line numbers those of the markdown file.
    source = "\n" * block.line + block.code
    code = compile(source, str(block.path), "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(code, module.__dict__)
    except BaseException as exc:
        exc.add_note("--- in the documentation block ---\n" + _numbered(block))
        raise
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        else:
            del sys.modules["__main__"]
    return out.getvalue()


def run_cells(cells: list[DocBlock]) -> list[str]:
    """Run notebook cells in order, in one namespace, inside a running event loop.

    Like Jupyter, a cell may ``await`` at its top level, and sync code in a cell runs
    while the loop is running. Returns what each cell printed.
    """
    namespace = types.ModuleType("__main__").__dict__
    printed: list[str] = []

    async def notebook() -> None:
        for cell in cells:
            source = "\n" * cell.line + cell.code
            flags = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
            code = compile(source, str(cell.path), "exec", flags=flags, dont_inherit=True)
            out = io.StringIO()
            try:
                with contextlib.redirect_stdout(out):
                    result = eval(code, namespace)
                    if inspect.iscoroutine(result):
                        await result
            except BaseException as exc:
                exc.add_note("--- in the notebook cell ---\n" + _numbered(cell))
                raise
            printed.append(out.getvalue())

    saved_main = sys.modules.get("__main__")
    sys.modules["__main__"] = types.ModuleType("__main__")
    sys.modules["__main__"].__dict__.update(namespace)
    try:
        asyncio.run(notebook())
    finally:
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
    return printed


BLOCKS = [block for block in collect() if not block.notebook]
NOTEBOOKS = notebooks()


def _block_params(blocks: list[DocBlock]) -> list[Any]:
    """One test item per block; a block flagged slow is marked slow."""
    return [
        pytest.param(block, id=block.test_id, marks=[pytest.mark.slow] if block.slow else ())
        for block in blocks
    ]


@pytest.mark.parametrize("block", _block_params(BLOCKS))
def test_doc_block(block: DocBlock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    if block.postgres:
        with throwaway_database() as url:
            monkeypatch.setenv("DATABASE_URL", url)
            printed = run_block(block)
    else:
        printed = run_block(block)
    if block.expected is not None:
        assert _strip_one_newline(printed) == _strip_one_newline(block.expected), (
            "printed output differs from the ```text block after\n" + _numbered(block)
        )


@pytest.mark.parametrize(
    "page", sorted(NOTEBOOKS), ids=[f"{p}:notebook" for p in sorted(NOTEBOOKS)]
)
def test_doc_notebook(page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    cells = NOTEBOOKS[page]
    for cell, printed in zip(cells, run_cells(cells), strict=True):
        if cell.expected is not None:
            assert _strip_one_newline(printed) == _strip_one_newline(cell.expected), (
                "printed output differs from the ```text block after\n" + _numbered(cell)
            )


def test_the_notebooks_page_is_run_as_a_notebook() -> None:
    assert len(NOTEBOOKS.get("notebooks.md", [])) >= 4


# The harness's own parsing, checked on small made-up pages.

SAMPLE = """\
# Title

```python
x = 1
print(x)
```

```text
1
```

~~~~python no-run
def f(a, b): ...
~~~~

```mermaid
graph TD
```

```python
print("a")
```
Some prose in between.
```text
a
```

- A list item:

   ```python
   if True:
       print("b")
   ```
   ```text
   b
   ```

````markdown
```python
print("nested, never run")
```
````
"""


def test_parse_pairs_text_blocks_and_skips_others() -> None:
    blocks = doc_blocks(Path("sample.md"), SAMPLE)
    assert [(b.line, b.expected) for b in blocks] == [(3, "1\n"), (20, None), (30, "b\n")]
    assert blocks[0].code == "x = 1\nprint(x)\n"
    assert blocks[2].code == 'if True:\n    print("b")\n'


def test_flags_after_the_language_combine() -> None:
    text = "```python postgres slow\nx = 1\n```\n\n```python\ny = 2\n```\n"
    blocks = doc_blocks(Path("flags.md"), text)
    assert [(b.postgres, b.slow) for b in blocks] == [(True, True), (False, False)]


def test_a_slow_block_is_marked_slow_and_the_others_are_not() -> None:
    params = {param.id: param.marks for param in _block_params(BLOCKS)}
    slow = [block.test_id for block in BLOCKS if block.slow]
    quick = [block.test_id for block in BLOCKS if not block.slow]
    assert slow and quick
    for test_id in slow:
        assert [mark.name for mark in params[test_id]] == ["slow"], test_id
    for test_id in quick:
        assert params[test_id] == (), test_id


def test_page_without_python_blocks() -> None:
    assert doc_blocks(Path("empty.md"), "# Nothing to run\n\n```text\nhi\n```\n") == []


def test_unclosed_fence_runs_to_end_of_page() -> None:
    (block,) = doc_blocks(Path("open.md"), "```python\nprint(1)\n")
    assert block.code == "print(1)\n"


def test_run_block_is_main_fresh_and_keeps_line_numbers(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    first, second = doc_blocks(
        page,
        "```python\n"
        "import sys\n"
        "assert sys.modules['__main__'].__dict__ is globals()\n"
        "value = 1\n"
        "print(__name__, value)\n"
        "```\n"
        "\n"
        "```python\n"
        "print(value)\n"
        "```\n",
    )
    assert run_block(first) == "__main__ 1\n"
    # The second block does not see the first one's names.
    with pytest.raises(NameError) as info:
        run_block(second)
    tb = info.value.__traceback__
    assert tb is not None
    while tb.tb_next is not None:
        tb = tb.tb_next
    assert (tb.tb_frame.f_code.co_filename, tb.tb_lineno) == (str(page), 9)
    assert "page.md:8" in "".join(info.value.__notes__)


def test_notebook_cells_share_names_and_run_inside_a_running_loop(tmp_path: Path) -> None:
    page = tmp_path / "nb.md"
    cells = doc_blocks(
        page,
        "```python notebook\nx = 41\n```\n\n"
        "```python notebook\n"
        "import asyncio\n"
        "asyncio.get_running_loop()  # raises outside a running loop\n"
        "await asyncio.sleep(0)\n"
        "print(x + 1)\n"
        "```\n",
    )
    assert [c.notebook for c in cells] == [True, True]
    assert run_cells(cells) == ["", "42\n"]
