"""The documentation site as a reader gets it: the HTML ``mkdocs build`` writes.

``test_docs.py`` runs the code of the pages; this module builds the site into a temporary
folder and reads the HTML, because a page can build with ``--strict`` and still show its
code as raw text (a fence form Markdown does not understand), lose its highlighting, link
to an anchor that is not there, or load a font from another host. Each check returns the
problems it finds, and a deliberately broken site proves that each one finds its kind.
"""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
import yaml

from test_docs import parse_fences
from test_public_faces import FACES

ROOT = Path(__file__).resolve().parent.parent

# Tags whose URL attribute the browser fetches by itself when the page loads.
_ASSET_ATTRIBUTES = {
    "script": "src",
    "img": "src",
    "iframe": "src",
    "source": "src",
    "audio": "src",
    "video": "src",
    "embed": "src",
    "link": "href",
}
_FENCE_AS_SPAN = re.compile(r"<p><code>(?P<info>[^<\n]*)\n[^<]*</code></p>")
_CSS_URL = re.compile(r"""(?:url\(\s*['"]?|@import\s+['"])(?P<url>[^'")\s]+)""")


@dataclass
class PageParts:
    """What the checks need from one HTML page."""

    ids: set[str] = field(default_factory=set)
    links: list[str] = field(default_factory=list)  # href of <a>
    assets: list[str] = field(default_factory=list)  # URLs fetched on load
    text: list[str] = field(default_factory=list)  # text outside <pre>
    pres: int = 0  # <pre> elements
    bare_pres: int = 0  # <pre> outside a highlighted block
    highlighted: int = 0  # code blocks rendered by the highlighter
    tokens: int = 0  # highlighted blocks with at least one Pygments token


class _PageParser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts = PageParts()
        # For each open element: does it open a highlighted block? (HTML void elements are
        # never pushed, so the stack follows the nesting Python-Markdown writes.)
        self._stack: list[tuple[str, bool]] = []
        self._pre_depth = 0
        self._tokens_seen = False

    def _in_highlight(self) -> bool:
        return any(highlight for _, highlight in self._stack)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = {name: value or "" for name, value in attrs}
        if "id" in values:
            self.parts.ids.add(values["id"])
        if tag == "a" and "href" in values:
            self.parts.links.append(values["href"])
        if _ASSET_ATTRIBUTES.get(tag) in values and (tag != "link" or _fetched(values)):
            self.parts.assets.append(values[_ASSET_ATTRIBUTES[tag]])
        if tag == "span" and self._pre_depth and values.get("class"):
            self._tokens_seen = True
        if tag in _VOID:
            return
        classes = values.get("class", "").split()
        opens_highlight = "highlight" in classes and not self._in_highlight()
        if opens_highlight:
            self.parts.highlighted += 1
            self._tokens_seen = False
        if tag == "pre":
            self.parts.pres += 1
            self._pre_depth += 1
            if not (opens_highlight or self._in_highlight()):
                self.parts.bare_pres += 1
        self._stack.append((tag, opens_highlight))

    def handle_endtag(self, tag: str) -> None:
        while self._stack:
            open_tag, opened_highlight = self._stack.pop()
            if open_tag == "pre":
                self._pre_depth -= 1
            if opened_highlight and self._tokens_seen:
                self.parts.tokens += 1
            if open_tag == tag:
                return

    def handle_data(self, data: str) -> None:
        if not self._pre_depth:
            self.parts.text.append(data)


_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source"}


def _fetched(link_attributes: dict[str, str]) -> bool:
    """Whether a browser fetches a <link>'s href on load (a style sheet, an icon, ...)."""
    rel = set(link_attributes.get("rel", "").lower().split())
    return bool(rel & {"stylesheet", "icon", "preload", "modulepreload", "prefetch", "manifest"})


def parse_page(html: str) -> PageParts:
    """The ids, links, assets, text and code blocks of one page."""
    parser = _PageParser()
    parser.feed(html)
    parser.close()
    return parser.parts


def _external(url: str) -> bool:
    return bool(urlsplit(url).scheme in {"http", "https"} or url.startswith("//"))


def raw_fences(site: Path) -> list[str]:
    """Fences Markdown did not understand, so their code shows as text.

    Depending on its neighbours, such a block shows its backticks in the page's text, or
    becomes a paragraph of one code span over several lines (the fence's backticks read as
    a code span's; a code span wrapped inside a sentence has words around it): both are
    found.
    """
    problems = []
    for page in _pages(site):
        html = page.read_text(encoding="utf-8")
        if "```" in "".join(parse_page(html).text):
            problems.append(f"{_name(site, page)}: ``` in the text")
        for match in _FENCE_AS_SPAN.finditer(html):
            problems.append(f"{_name(site, page)}: {match['info']!r}")
    return problems


def unhighlighted_code(site: Path, docs: Path) -> list[str]:
    """Pages with code the highlighter did not render.

    A ``<pre>`` outside a highlighted block is one; so is a page with fewer highlighted
    blocks than its Markdown source has fences, or fewer blocks with Pygments tokens than
    it has python fences (a block that lost its language shows as plain text).
    """
    problems = []
    for page in _pages(site):
        parts = parse_page(page.read_text(encoding="utf-8"))
        name = _name(site, page)
        if parts.bare_pres:
            problems.append(f"{name}: {parts.bare_pres} <pre> without highlighting")
        source = docs / Path(name).with_suffix(".md")
        if not source.is_file():
            continue
        fences = parse_fences(source.read_text(encoding="utf-8"))
        python = sum(fence.lang in {"python", "python3", "py"} for fence in fences)
        if parts.highlighted < len(fences):
            problems.append(f"{name}: {len(fences)} fences, {parts.highlighted} highlighted")
        if parts.tokens < python:
            problems.append(f"{name}: {python} python fences, {parts.tokens} with tokens")
    return problems


def broken_links(site: Path) -> list[str]:
    """Links to a page or an anchor the site does not have."""
    pages = {page: parse_page(page.read_text(encoding="utf-8")) for page in _pages(site)}
    problems = []
    for page, parts in pages.items():
        for href in parts.links:
            url = urlsplit(href)
            if url.scheme or href.startswith("//"):
                continue
            # The 404 page links from the site's root: it is served at any missing path.
            base = site if url.path.startswith("/") else page.parent
            target = (base / unquote(url.path).lstrip("/")).resolve() if url.path else page
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                problems.append(f"{_name(site, page)}: {href} (no such page)")
            elif url.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else set()
                if unquote(url.fragment) not in ids:
                    problems.append(f"{_name(site, page)}: {href} (no such anchor)")
    return problems


def external_assets(site: Path) -> list[str]:
    """Scripts, styles, fonts and images a page or style sheet loads from another host."""
    problems = [
        f"{_name(site, page)}: {url}"
        for page in _pages(site)
        for url in parse_page(page.read_text(encoding="utf-8")).assets
        if _external(url)
    ]
    for sheet in sorted(site.rglob("*.css")):
        for match in _CSS_URL.finditer(sheet.read_text(encoding="utf-8")):
            if _external(match["url"]):
                problems.append(f"{_name(site, sheet)}: {match['url']}")
    return problems


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def _name(site: Path, path: Path) -> str:
    return path.relative_to(site).as_posix()


def build(config: Path, site: Path, *, strict: bool = True) -> None:
    """Build a site with mkdocs in a child process; fail with its output if it fails."""
    command = [sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(config), "-d", str(site)]
    if strict:
        command.append("--strict")
    done = subprocess.run(
        command, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    )
    assert done.returncode == 0, done.stdout + done.stderr


def small_site(tmp_path: Path, pages: dict[str, str]) -> tuple[Path, Path]:
    """Write a site of a few pages with the project's own mkdocs.yml settings.

    Returns the config file and the docs folder. The reference is left out (its plugin
    needs nothing here) and the nav lists the pages in the order given.
    """
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in pages.items():
        (docs / name).write_text(text, encoding="utf-8")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    config.update(
        docs_dir=str(docs),
        nav=list(pages),
        hooks=[str(ROOT / hook) for hook in config["hooks"]],
        plugins=["search"],
    )
    path = tmp_path / "mkdocs.yml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, docs


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("site")
    build(ROOT / "mkdocs.yml", folder)
    return folder


@pytest.mark.slow
def test_the_site_shows_no_raw_fence(site: Path) -> None:
    assert raw_fences(site) == []


@pytest.mark.slow
def test_every_code_block_of_the_site_is_highlighted(site: Path) -> None:
    assert unhighlighted_code(site, ROOT / "docs") == []


@pytest.mark.slow
def test_every_internal_link_of_the_site_reaches_its_page_and_anchor(site: Path) -> None:
    assert broken_links(site) == []


@pytest.mark.slow
def test_the_site_loads_nothing_from_another_host(site: Path) -> None:
    assert external_assets(site) == []


def test_the_nav_has_a_reference_page_for_every_face() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    (reference,) = [item["API reference"] for item in config["nav"] if "API reference" in item]
    assert sorted(f"reference/{face}.md" for face in FACES) == sorted(reference[1:])


@pytest.mark.slow
def test_the_reference_documents_every_public_name_of_every_face(site: Path) -> None:
    for face in FACES:
        html = (site / "reference" / f"{face}.html").read_text(encoding="utf-8")
        ids = parse_page(html).ids
        names = importlib.import_module(face).__all__
        assert [name for name in names if f"{face}.{name}" not in ids] == [], face


# A flag the site does not understand, its output right under it: the backticks show.
BROKEN_FENCE_PAGE = """\
# Fence

```python no run!
print("raw")
```
```text
raw
```
"""

BROKEN_PAGE = """\
# Broken

A fence with a flag the site does not understand:

```python no run!
print("raw")
```

<pre><code>plain code, no highlighting</code></pre>

[a missing page](missing.md), [a missing anchor](index.md#nowhere), [fine](index.md#top).

<script src="https://cdn.example.com/highlight.js"></script>
<link rel="stylesheet" href="https://fonts.example.com/css?family=Roboto">
"""


@pytest.mark.slow
def test_each_check_finds_its_problem_on_a_deliberately_broken_page(tmp_path: Path) -> None:
    index = '# Index\n\n<a id="top"></a>Text.\n'
    pages = {"index.md": index, "broken.md": BROKEN_PAGE, "fence.md": BROKEN_FENCE_PAGE}
    config, docs = small_site(tmp_path, pages)
    site = tmp_path / "site"
    # Not strict: mkdocs itself warns about the missing page, and the checks must find
    # every problem on their own.
    build(config, site, strict=False)

    assert raw_fences(site) == ["broken.html: 'python no run!'", "fence.html: ``` in the text"]
    problems = unhighlighted_code(site, docs)
    assert "broken.html: 1 <pre> without highlighting" in problems
    assert "broken.html: 1 python fences, 0 with tokens" in problems
    assert broken_links(site) == [
        "broken.html: missing.md (no such page)",
        "broken.html: index.html#nowhere (no such anchor)",
    ]
    assert external_assets(site) == [
        "broken.html: https://cdn.example.com/highlight.js",
        "broken.html: https://fonts.example.com/css?family=Roboto",
    ]


@pytest.mark.slow
def test_the_site_drops_the_test_runners_fence_flags_and_keeps_the_code(tmp_path: Path) -> None:
    flags = ("no-run", "notebook", "postgres", "slow")
    page = "# Flags\n\n" + "".join(f"```python {flag}\nprint({flag!r})\n```\n\n" for flag in flags)
    config, _ = small_site(tmp_path, {"index.md": page})
    build(config, tmp_path / "site")

    parts = parse_page((tmp_path / "site" / "index.html").read_text(encoding="utf-8"))
    assert (parts.highlighted, parts.tokens) == (4, 4)
    assert raw_fences(tmp_path / "site") == []
