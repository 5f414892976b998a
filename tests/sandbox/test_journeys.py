"""The sandbox's journeys in a real browser: Chromium, driven by Playwright, against
``nodestep sandbox`` started as a process. Each journey saves screenshots (the folder is
printed; ``NODESTEP_SANDBOX_SCREENS`` chooses it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import expect
from sandbox_process import running

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One sandbox on a memory store for the journeys of this module."""
    with running("memory:", tmp_path_factory.mktemp("sandbox")) as url:
        yield url


def _start_run(page: Any, base: str, graph: str, **fields: str) -> None:
    page.goto(f"{base}/ui/graphs/{graph}")
    for name, value in fields.items():
        page.get_by_label(re.compile(f"^{name}\\b")).fill(value)
    page.get_by_role("button", name=f"Run {graph}").click()


def test_index_lists_graphs_and_graph_page_draws_it_with_fields_and_reducers(
    page: Any, base: str, screens: Path
) -> None:
    page.goto(f"{base}/ui")
    expect(page).to_have_title("nodestep sandbox")
    page.get_by_role("link", name="chat", exact=True).first.click()
    expect(page.get_by_role("heading", name="Graph chat")).to_be_visible()
    expect(page.locator("figure.drawing svg g.node")).to_have_count(3)
    row = page.get_by_role("row", name=re.compile("messages"))
    expect(row).to_contain_text("add_messages")
    page.screenshot(path=screens / "1-graph.png", full_page=True)
    page.goto(f"{base}/ui/graphs/pricing")
    expect(page.get_by_role("row", name=re.compile("total"))).to_contain_text("last value")
    page.goto(f"{base}/ui/graphs/nope")
    expect(page.get_by_role("alert")).to_contain_text("No graph is named 'nope'")


def test_new_run_form_starts_a_run_the_live_view_shows_steps_events_and_colours(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "pricing", items='["tea", "cake"]', note="for table 4")
    expect(page.locator("#run-status")).to_have_text("done", timeout=15_000)
    steps = page.locator("#steps")
    expect(steps).to_contain_text('custom {"priced":2}')
    expect(steps).to_contain_text('price wrote {"total":6}')
    expect(steps).to_contain_text("step 1 merged")
    expect(page.locator("#final")).to_contain_text('"note": "for table 4 (total 6)"')
    done = page.locator("figure.drawing g.node[data-status=done]")
    expect(done).to_have_count(2)
    page.screenshot(path=screens / "4-live-run.png", full_page=True)


def test_chat_box_streams_the_reply_token_by_token(page: Any, base: str, screens: Path) -> None:
    page.goto(f"{base}/ui/graphs/chat")
    page.get_by_label("messages (message)").fill("Where does tea grow?")
    page.get_by_role("button", name="Run chat").click()
    expect(page.locator("#tokens")).to_have_text("Tea grows on Camellia sinensis.")
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text("Where does tea grow?")
    page.screenshot(path=screens / "4-chat-tokens.png", full_page=True)


def test_threads_page_filters_by_status_and_metadata(page: Any, base: str, screens: Path) -> None:
    for shop in ("north", "south"):
        page.goto(f"{base}/ui/graphs/pricing")
        page.get_by_text("Thread", exact=True).click()
        page.get_by_label("Metadata (key=value, comma separated)").fill(f"shop={shop}")
        page.get_by_role("button", name="Run pricing").click()
        expect(page.locator("#run-status")).to_have_text("done")
    page.goto(f"{base}/ui/threads")
    page.get_by_label("Metadata (key=value, comma separated)").fill("shop=north")
    page.get_by_role("button", name="Filter").click()
    rows = page.locator("tbody tr")
    expect(rows).to_have_count(1)
    expect(rows).to_contain_text("shop=north")
    page.get_by_label("Status").select_option("error")
    page.get_by_role("button", name="Filter").click()
    expect(rows).to_have_text("No thread matches.")
    page.goto(f"{base}/ui/threads?status=idle")
    expect(page.get_by_role("cell", name="pricing").first).to_be_visible()
    page.screenshot(path=screens / "2-threads.png", full_page=True)


def test_thread_page_shows_the_timeline_and_the_state_at_any_event(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "pricing", items='["tea"]')
    expect(page.locator("#run-status")).to_have_text("done")
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    events = page.get_by_role("list", name="Events, newest first").locator("li")
    expect(events.first).to_contain_text("run_completed")
    expect(page.locator(".values dt").nth(2)).to_have_text("total")
    page.get_by_role("link", name=re.compile("^#1 checkpoint")).click()
    expect(page.get_by_role("heading", name=re.compile("State after event"))).to_be_visible()
    total = page.locator(".values dd").nth(2)
    expect(total).to_have_text("0")
    expect(page.get_by_role("link", name="main")).to_have_attribute("aria-current", "page")
    page.screenshot(path=screens / "3-thread.png", full_page=True)


def test_a_script_in_a_state_value_shows_as_text_and_never_runs(
    page: Any, base: str, screens: Path
) -> None:
    attack = "<script>alert(1)</script><img src=x onerror=alert(2)>"
    _start_run(page, base, "pricing", note=attack)
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text(attack)
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    expect(page.locator(".values")).to_contain_text(attack)
    assert page.locator(".values script, .values img").count() == 0
    page.goto(f"{base}/ui/threads")
    page.screenshot(path=screens / "xss-as-text.png", full_page=True)
    # the page fixture fails the test if a dialog opened or a script failed


def test_a_run_is_started_and_read_with_the_keyboard_only(
    page: Any, base: str, screens: Path
) -> None:
    page.goto(f"{base}/ui/graphs/pricing")
    page.keyboard.press("Tab")
    expect(page.get_by_role("link", name="Skip to content")).to_be_focused()
    page.keyboard.press("Enter")
    for _ in range(40):  # tab to the first control of the form
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.id") == "field-items":
            break
    expect(page.get_by_label("items (JSON)")).to_be_focused()
    page.keyboard.type('["tea"]')
    page.keyboard.press("Tab")
    page.keyboard.type("typed")
    for _ in range(10):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.tagName") == "BUTTON":
            break
    expect(page.get_by_role("button", name="Run pricing")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text('"note": "typed (total 3)"')
    page.screenshot(path=screens / "keyboard.png", full_page=True)


def test_every_main_control_has_an_accessible_name(page: Any, base: str) -> None:
    _start_run(page, base, "refund", amount="5")
    expect(page.locator("#run-status")).to_have_text("paused")
    run = page.url.removeprefix(base)
    thread = run.split("/runs/")[0]
    pages = ["/ui", "/ui/graphs/pricing", "/ui/graphs/chat", "/ui/threads", "/ui/store"]
    pages += [run, thread, f"{thread}?at=" + page_first_event(page, base, thread)]
    pages += ["/ui/agents/support"]
    for path in pages:
        page.goto(base + path)
        unnamed = page.evaluate(
            """() => [...document.querySelectorAll(
                    'input:not([type=hidden]), select, textarea, button, a')]
                .filter(el => !el.closest('svg') && !(el.labels && el.labels.length)
                              && !el.getAttribute('aria-label') && !el.textContent.trim())
                .map(el => el.outerHTML)"""
        )
        assert unnamed == [], path


def test_an_interrupt_is_answered_by_key_and_the_run_goes_on(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "refund", amount="50")
    expect(page.locator("#run-status")).to_have_text("paused")
    paused = page.locator("figure.drawing g.node[data-status=paused]")
    expect(paused).to_have_count(1)
    expect(paused).to_contain_text("approve")
    page.get_by_role("link", name="Answer the interrupt").click()
    form = page.locator("#interrupts")
    expect(form).to_contain_text("Pay out 50?")
    page.get_by_label(re.compile(r"^Answer to approve:.*approval$")).fill("yes")
    page.screenshot(path=screens / "5-interrupt.png", full_page=True)
    page.get_by_role("button", name="Send the answers").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text('"status": "approved"')


def test_a_tool_call_is_edited_before_it_runs(page: Any, base: str, screens: Path) -> None:
    _start_run(page, base, "refunds", messages="Refund order A-17")
    expect(page.locator("#run-status")).to_have_text("paused")
    page.get_by_role("link", name="Answer the interrupt").click()
    call = page.get_by_role("group", name=re.compile("Tool call pay_back"))
    expect(call.get_by_label("Approve")).to_be_checked()
    call.get_by_label("Edit the arguments").check()
    call.get_by_label("Arguments of pay_back (JSON)").fill('{"order": "A-17", "amount": 100}')
    page.screenshot(path=screens / "5-tool-approval.png", full_page=True)
    page.get_by_role("button", name="Send the answers").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text("paid back 100 EUR on A-17")


def test_a_tool_call_is_rejected_with_a_reason(page: Any, base: str) -> None:
    _start_run(page, base, "refunds", messages="Refund order A-17")
    expect(page.locator("#run-status")).to_have_text("paused")
    page.get_by_role("link", name="Answer the interrupt").click()
    call = page.get_by_role("group", name=re.compile("Tool call pay_back"))
    call.get_by_role("radio", name="Reject").check()
    call.get_by_label("Reason to reject pay_back").fill("too much")
    page.get_by_role("button", name="Send the answers").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text("too much")
    expect(page.locator("#final")).not_to_contain_text("paid back")


def test_edited_arguments_that_are_not_json_are_refused_with_the_fix(page: Any, base: str) -> None:
    _start_run(page, base, "refunds", messages="Refund order A-17")
    expect(page.locator("#run-status")).to_have_text("paused")
    page.get_by_role("link", name="Answer the interrupt").click()
    call = page.get_by_role("group", name=re.compile("Tool call pay_back"))
    call.get_by_label("Edit the arguments").check()
    call.get_by_label("Arguments of pay_back (JSON)").fill("amount 100")
    page.get_by_role("button", name="Send the answers").click()
    expect(page.get_by_role("alert")).to_contain_text("must be a JSON object")


def test_a_fork_with_an_edited_state_runs_and_is_compared_and_traced(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "pricing", items='["tea"]', note="first")
    expect(page.locator("#run-status")).to_have_text("done")
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    page.get_by_role("link", name=re.compile(r"^#3 superstep_completed")).click()
    page.get_by_label("note (JSON)").fill('"second"')
    page.screenshot(path=screens / "6-fork-form.png", full_page=True)
    page.get_by_role("button", name="Fork and run").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text('"note": "second (total 3)"')
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    tree = page.get_by_role("list", name="Branches")
    expect(tree.get_by_role("link")).to_have_count(3)  # main, the fork, its diff link
    # the thread opens on the branch the server now shows and runs: the fork
    expect(tree.locator("[aria-current=page]")).not_to_have_text("main")
    expect(page.locator(".values dd").nth(1)).to_have_text('"second (total 3)"')
    tree.get_by_role("link", name="diff with main").click()
    expect(page.get_by_role("heading", name=re.compile("^Diff of main and"))).to_be_visible()
    row = page.get_by_role("row", name=re.compile("^note"))
    expect(row).to_contain_text('"first (total 3)"')
    expect(row).to_contain_text('"second (total 3)"')
    expect(page.get_by_role("table")).to_contain_text("1 field differs")
    page.screenshot(path=screens / "6-diff.png", full_page=True)
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    page.locator(".values").get_by_role("link", name="note", exact=True).click()
    expect(page.get_by_role("heading", name="Who wrote note")).to_be_visible()
    writes = page.get_by_role("table").locator("tbody tr")
    expect(writes).to_have_count(1)
    expect(writes).to_contain_text("node receipt")
    page.screenshot(path=screens / "6-provenance.png", full_page=True)


def test_a_fork_where_a_run_paused_waits_at_its_interrupt_form(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "refund", amount="120")
    expect(page.locator("#run-status")).to_have_text("paused")
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    page.get_by_role("link", name=re.compile(r"^#\d+ run_paused")).click()
    page.get_by_label("amount (JSON)").fill("5")
    page.get_by_role("button", name="Fork and run").click()
    # No run that fails for want of an answer: the new branch waits for the same one.
    expect(page.locator("#interrupts")).to_contain_text("Pay out 120?")
    tree = page.get_by_role("list", name="Branches")
    expect(tree.locator("[aria-current=page]")).not_to_have_text("main")
    expect(page.locator(".values dd").first).to_have_text("5")
    page.screenshot(path=screens / "6-fork-paused.png", full_page=True)
    page.get_by_label(re.compile(r"^Answer to approve:.*approval$")).fill("yes")
    page.get_by_role("button", name="Send the answers").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text('"amount": 5')


def test_a_fork_value_that_is_not_json_is_refused_with_the_fix(page: Any, base: str) -> None:
    _start_run(page, base, "pricing", items='["tea"]')
    expect(page.locator("#run-status")).to_have_text("done")
    page.get_by_role("link", name=re.compile("^[0-9a-f-]{36}$")).click()
    page.get_by_role("link", name=re.compile(r"^#1 checkpoint")).click()
    page.get_by_label("note (JSON)").fill("no quotes")
    page.get_by_role("button", name="Fork and run").click()
    expect(page.get_by_role("alert")).to_contain_text("Field 'note' must be JSON")


SEEN_REPLIES = """
new MutationObserver(() => {
  const reply = document.querySelector("#live-reply .content");
  if (!reply || !reply.textContent) return;
  const seen = JSON.parse(sessionStorage.getItem("seen") || "[]");
  if (seen[seen.length - 1] !== reply.textContent) seen.push(reply.textContent);
  sessionStorage.setItem("seen", JSON.stringify(seen));
}).observe(document, { subtree: true, childList: true, characterData: true });
"""


def test_an_agent_from_specs_chats_and_shows_its_nodes_and_tools(
    page: Any, base: str, screens: Path
) -> None:
    # Every page of the chat records what its live reply shows, each time it changes.
    page.add_init_script(SEEN_REPLIES)
    page.goto(f"{base}/ui")
    page.get_by_role("link", name="Chat with support").click()
    page.get_by_label("Message", exact=True).fill("Where is my order 1042?")
    page.get_by_role("button", name="Send").click()
    log = page.get_by_role("list", name="Messages")
    expect(log.locator("li")).to_have_count(4)  # user, the call, its result, the reply
    # The reply came word by word while the run went on; the page then showed the thread.
    seen = page.evaluate("JSON.parse(sessionStorage.getItem('seen') || '[]')")
    assert seen[-1] == "Your order shipped on Monday."
    assert "Your order" in seen and len(seen) >= 5, seen
    expect(page.locator("#live-reply")).to_have_count(0)
    expect(page.get_by_role("button", name="Send")).to_be_enabled()
    expect(log.locator("li").last).to_contain_text("Your order shipped on Monday.")
    expect(log).to_contain_text("calls get_order")
    expect(page.get_by_role("row", name=re.compile("^chat LLMNode"))).to_contain_text("completed")
    tools = page.get_by_role("table", name="Tools called")
    expect(tools).to_contain_text('"number": 1042')
    expect(tools).to_contain_text("order 1042: shipped on Monday")
    page.get_by_label("Message", exact=True).fill("Thanks!")
    page.get_by_role("button", name="Send").click()
    expect(log.locator("li").last).to_contain_text("You're welcome!")
    page.screenshot(path=screens / "7-agent-chat.png", full_page=True)


def test_an_agent_that_fails_says_why_in_its_chat(page: Any, base: str) -> None:
    page.goto(f"{base}/ui/agents/mute")
    page.get_by_label("Message", exact=True).fill("Hello?")
    page.get_by_role("button", name="Send").click()
    failure = page.get_by_role("alert")
    expect(failure).to_contain_text("The agent failed: ModelError")
    expect(failure).to_contain_text("asked for reply 1, but its script has 0")
    expect(page.locator("#reply-status")).to_have_text("failed")
    expect(page.get_by_role("button", name="Send")).to_be_disabled()  # while the run went on
    failure.get_by_role("link", name="Show the conversation").click()
    expect(page.locator("#live-reply")).to_have_count(0)
    chat = page.get_by_role("row", name=re.compile("^chat LLMNode"))
    expect(chat).to_contain_text("failed")
    expect(chat).to_contain_text("asked for reply 1, but its script has 0")
    expect(page.get_by_role("button", name="Send")).to_be_enabled()


def page_first_event(page: Any, base: str, thread: str) -> str:
    """Return the id of a thread's first event, read from its page."""
    page.goto(base + thread)
    link = page.get_by_role("link", name=re.compile(r"^#1 checkpoint"))
    return str(link.get_attribute("href")).split("at=")[1]


def test_a_failing_node_is_drawn_failed_and_its_error_shown(
    page: Any, base: str, screens: Path
) -> None:
    _start_run(page, base, "broken", item="bell")
    expect(page.locator("#run-status")).to_have_text("failed")
    expect(page.locator("#steps")).to_contain_text("no stock of 'bell'")
    failed = page.locator("figure.drawing g.node[data-status=failed]")
    expect(failed).to_have_count(1)
    expect(failed).to_contain_text("reserve")
    page.screenshot(path=screens / "4-failed-run.png", full_page=True)


def test_a_tool_call_is_approved_as_the_model_wrote_it(page: Any, base: str) -> None:
    _start_run(page, base, "refunds", messages="Refund order A-17")
    expect(page.locator("#run-status")).to_have_text("paused")
    page.get_by_role("link", name="Answer the interrupt").click()
    call = page.get_by_role("group", name=re.compile("Tool call pay_back"))
    expect(call.get_by_label("Arguments of pay_back (JSON)")).to_have_value(
        '{\n  "order": "A-17",\n  "amount": 120\n}'
    )
    page.get_by_role("button", name="Send the answers").click()
    expect(page.locator("#run-status")).to_have_text("done")
    expect(page.locator("#final")).to_contain_text("paid back 120 EUR on A-17")
