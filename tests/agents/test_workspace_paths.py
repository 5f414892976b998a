"""Workspace paths: one normal form, the rules that refuse a path, and glob patterns."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nodestep import WorkspaceError
from nodestep.agents import Workspace
from nodestep.agents._workspace.paths import MAX_PATH_CHARS, compile_glob, normal_path

SEGMENT = st.text(
    st.characters(blacklist_categories=("Cc", "Cs"), blacklist_characters="/\\"),
    min_size=1,
    max_size=8,
).filter(lambda s: s not in (".", ".."))
NOISE = st.sampled_from(["", "./", "/", "//", ".//./"])


@pytest.mark.slow
@given(st.lists(SEGMENT, min_size=1, max_size=6), st.lists(NOISE, min_size=7, max_size=7))
def test_dots_and_empty_segments_are_dropped_and_the_normal_form_is_stable(
    segments: list[str], noise: list[str]
) -> None:
    if re.match("[A-Za-z]:", segments[0]):
        segments[0] = "x" + segments[0]  # a drive is refused, tested below
    joined = "".join(f"{noise[i]}{s}/" for i, s in enumerate(segments)) + noise[-1]
    written = joined.lstrip("/") or "x"
    normal = normal_path(written)
    assert normal == "/".join(segments)
    assert normal_path(normal) == normal
    parts = normal.split("/")
    assert "" not in parts and "." not in parts and ".." not in parts


@given(
    st.lists(SEGMENT, max_size=3),
    st.lists(SEGMENT, max_size=3),
)
def test_a_dot_dot_segment_is_refused_anywhere_even_where_it_stays_inside(
    before: list[str], after: list[str]
) -> None:
    if before and re.match("[A-Za-z]:", before[0]):
        before[0] = "x" + before[0]  # a drive is refused first, tested below
    path = "/".join([*before, "..", *after])
    with pytest.raises(WorkspaceError) as caught:
        normal_path(path)
    assert caught.value.rule == "path"
    assert caught.value.path == path
    assert "'..' segment" in str(caught.value)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("/etc/passwd", "it is absolute; drop the leading '/'"),
        ("C:/Windows/win.ini", "it names a drive"),
        ("notes\\todo.md", "it holds a backslash; use '/' between folders"),
        ("notes/\x00.md", "it holds a control character"),
        ("a\nb", "it holds a control character"),
        ("", "it names no file"),
        ("./", "it names no file"),
        ("x" * (MAX_PATH_CHARS + 1), f"it is longer than {MAX_PATH_CHARS} characters"),
    ],
)
def test_a_bad_path_is_refused_with_the_path_and_the_rule(path: str, rule: str) -> None:
    with pytest.raises(WorkspaceError, match=r"Path .* is not allowed in the workspace") as caught:
        Workspace().read(path)
    assert rule in str(caught.value)
    assert caught.value.rule == "path"
    assert isinstance(caught.value, ValueError)


def test_a_path_that_is_no_string_is_refused_naming_its_type() -> None:
    with pytest.raises(WorkspaceError, match=r"A workspace path is a string, got int: 3"):
        normal_path(3)


def test_the_workspace_itself_is_a_folder_to_list_but_no_file() -> None:
    assert normal_path("", root=True) == ""
    assert normal_path("./", root=True) == ""
    assert Workspace({"a.md": "x"}).list(".") == ["a.md"]


@pytest.mark.parametrize(
    ("pattern", "matches"),
    [
        ("*.md", ["top.md"]),
        ("**/*.md", ["docs/deep/c.md", "docs/guide.md", "top.md"]),
        ("docs/*", ["docs/guide.md", "docs/x.txt"]),
        ("docs/**", ["docs/deep/c.md", "docs/guide.md", "docs/x.txt"]),
        ("docs/?.txt", ["docs/x.txt"]),
        ("docs/[gx]*", ["docs/guide.md", "docs/x.txt"]),
        ("docs/[!g]*", ["docs/x.txt"]),
        ("[a", []),
        ("./docs//*.txt", ["docs/x.txt"]),
    ],
)
def test_glob_matches_within_a_folder_and_across_folders_with_two_stars(
    pattern: str, matches: list[str]
) -> None:
    files = {p: "" for p in ["top.md", "docs/guide.md", "docs/x.txt", "docs/deep/c.md", "[a"]}
    found = Workspace(files).glob(pattern)
    assert found == (["[a"] if pattern == "[a" else matches)


def test_a_glob_pattern_follows_the_path_rules() -> None:
    with pytest.raises(WorkspaceError, match=r"'..' segment"):
        compile_glob("../*")
    with pytest.raises(WorkspaceError, match=r"absolute"):
        Workspace().glob("/**")


@given(st.text(st.sampled_from("ab*?/[]!.-&~|^\\"), max_size=10))
def test_any_pattern_either_compiles_or_is_refused_by_a_path_rule(pattern: str) -> None:
    try:
        regex = compile_glob(pattern)
    except WorkspaceError as error:
        assert error.rule == "path"
    else:
        for path in ["a", "a/b", "ab/ba", "a.b"]:
            regex.fullmatch(path)  # a valid regex: never raises
