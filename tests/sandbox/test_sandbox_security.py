"""The sandbox's guard on a real server: Host, Origin, token (then a cookie) and CSRF."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest
from playwright.sync_api import expect
from sandbox_process import running

pytestmark = pytest.mark.slow

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One sandbox with a token, on a memory store."""
    with running("memory:", tmp_path_factory.mktemp("guarded"), token=TOKEN) as url:
        yield url


def _csrf(http: httpx.Client, path: str) -> str:
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', http.get(path).text)
    assert found is not None
    return found.group(1)


def test_pages_without_the_token_go_to_the_login_form(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        answer = http.get("/ui/threads")
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/login?next=%2Fui%2Fthreads"
        assert http.get("/ui/api/threads/x/runs/y").status_code == 303
    with httpx.Client(base_url=base, cookies={"nodestep_ui": "guess"}) as guessing:
        assert guessing.get("/ui/threads").status_code == 303


def test_the_token_in_the_address_once_gives_a_cookie_and_leaves_the_address(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        answer = http.get("/ui/threads", params={"token": TOKEN, "status": "idle"})
        assert answer.status_code == 303
        assert answer.headers["location"] == "/ui/threads?status=idle"
        cookie = answer.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and TOKEN not in cookie
        assert http.get("/ui/threads").status_code == 200  # the client keeps the cookie
        wrong = httpx.get(f"{base}/ui/threads", params={"token": "wrong"})
        assert wrong.status_code == 303 and wrong.headers["location"].startswith("/ui/login")


def test_the_api_still_wants_its_token_header(base: str) -> None:
    assert httpx.get(f"{base}/info").status_code == 401
    assert httpx.get(f"{base}/info", headers={"x-api-key": TOKEN}).status_code == 200


def test_a_host_the_server_does_not_answer_to_is_refused(base: str) -> None:
    answer = httpx.get(f"{base}/ui/login", headers={"host": "evil.example:80"})
    assert answer.status_code == 400
    assert "Host header" in answer.text


def test_a_form_posted_from_another_site_or_without_csrf_is_refused(base: str) -> None:
    with httpx.Client(base_url=base) as http:
        http.get("/ui", params={"token": TOKEN})
        csrf = _csrf(http, "/ui/graphs/pricing")
        form = {"csrf": csrf, "field.note": "x"}
        other = http.post(
            "/ui/graphs/pricing/runs", data=form, headers={"origin": "https://evil.example"}
        )
        assert other.status_code == 403
        missing = http.post("/ui/graphs/pricing/runs", data={"field.note": "x"})
        assert missing.status_code == 403
        assert "CSRF token" in missing.text
        done = http.post("/ui/graphs/pricing/runs", data=form, headers={"origin": base})
        assert done.status_code == 303
        assert done.headers["location"].startswith("/ui/threads/")


def test_the_login_goes_back_to_the_page_asked_for_query_and_all(base: str) -> None:
    asked = "/ui/threads/shop%2Fnorth?branch=main&at=e%231"
    with httpx.Client(base_url=base) as http:
        answer = http.get(f"{asked}&token=wrong")  # a wrong token is left out
        assert answer.headers["location"] == "/ui/login?" + urlencode({"next": asked})
        form = http.get(answer.headers["location"]).text
        kept = re.search(r'name="next" value="([^"]+)"', form)
        assert kept is not None and kept.group(1).replace("&amp;", "&") == asked
        csrf = _csrf(http, "/ui/login")
        done = http.post("/ui/login", data={"csrf": csrf, "token": TOKEN, "next": asked})
        assert done.status_code == 303 and done.headers["location"] == asked
        for elsewhere in ("//evil.example/ui", "https://evil.example/ui", "/uix", "/\\evil"):
            away = http.post("/ui/login", data={"csrf": csrf, "token": TOKEN, "next": elsewhere})
            assert away.headers["location"] == "/ui", elsewhere
            shown = http.get("/ui/login", params={"next": elsewhere}).text
            assert 'name="next" value="/ui"' in shown


def test_the_login_form_lets_a_browser_in(page: Any, base: str, screens: Path) -> None:
    page.goto(f"{base}/ui/threads")
    expect(page.get_by_role("heading", name="Log in")).to_be_visible()
    page.get_by_label("Token").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("alert")).to_have_text("That token is not right.")
    page.get_by_label("Token").fill(TOKEN)
    page.screenshot(path=screens / "login.png")
    page.get_by_role("button", name="Log in").click()
    expect(page.get_by_role("heading", name="Threads")).to_be_visible()
    expect(page).to_have_url(f"{base}/ui/threads")


def test_a_run_streams_to_a_browser_that_logged_in_with_the_token(page: Any, base: str) -> None:
    page.goto(f"{base}/ui/graphs/chat?token={TOKEN}")
    page.get_by_label("messages (message)").fill("hi")
    page.get_by_role("button", name="Run chat").click()
    expect(page.locator("#tokens")).to_have_text("Tea grows on Camellia sinensis.")
    expect(page.locator("#run-status")).to_have_text("done")
