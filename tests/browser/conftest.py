"""Fixtures for the browser tests: Chromium through Playwright, live server nodes, pages.

Without Chromium or Playwright every browser test is skipped with a message saying how to
install them (harness.INSTALL_HINT); the rest of the suite runs.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.harness import (
    CHROMIUM_ARGS,
    INSTALL_HINT,
    LiveServer,
    Observer,
    chromium_path,
    within,
)


# Module scope, not session: while Playwright's sync API is open it keeps an event loop
# running in this thread, and the asyncio tests that follow could not run theirs.
@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    path = chromium_path()
    if path is None:
        pytest.skip(f"no Chromium found; {INSTALL_HINT}")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip(f"Playwright is not installed; {INSTALL_HINT}")
    with sync_playwright() as playwright:
        # launch() gives every run a fresh, temporary user-data dir of its own.
        browser = playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def server(request: pytest.FixtureRequest) -> Iterator[LiveServer]:
    """The live server; a test may change its settings with
    `@pytest.mark.parametrize("server", [{...}], indirect=True)`."""
    live = LiveServer(**getattr(request, "param", {})).start()
    yield live
    live.close()


@pytest.fixture
def observer(server: LiveServer) -> Iterator[Callable[[str], Observer]]:
    observers: list[Observer] = []

    def factory(table: str) -> Observer:
        obs = Observer(server.ws_url, table)
        observers.append(obs)
        return obs

    yield factory
    for obs in observers:
        obs.close()


class PageProblems:
    """Console errors, page errors and requests that left the server: all must stay empty."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.errors: list[str] = []
        self.foreign: list[str] = []

    def watch(self, page: Any) -> Any:
        page.on("pageerror", lambda error: self.errors.append(f"pageerror: {error}"))
        page.on("console", self._console)
        page.on("request", self._request)
        return page

    def _console(self, message: Any) -> None:
        if message.type == "error":
            where = (message.location or {}).get("url", "")
            self.errors.append(f"console.error: {message.text} (at {where})")

    def _request(self, request: Any) -> None:
        if not request.url.startswith((self.origin, "data:")):
            self.foreign.append(request.url)


@pytest.fixture
def open_page(browser: Any, server: LiveServer, tmp_path: Path) -> Iterator[Callable[..., Any]]:
    """Open the page in a fresh browser context (own storage); check it stayed clean."""
    contexts: list[Any] = []
    problems = PageProblems(f"http://127.0.0.1:{server.port}")

    def factory(path: str = "/", phone: bool = False, context: Any = None) -> Any:
        if context is None:
            viewport = {"width": 390, "height": 844} if phone else {"width": 1280, "height": 900}
            context = browser.new_context(
                viewport=viewport, is_mobile=phone, has_touch=phone, device_scale_factor=1
            )
            contexts.append(context)
        page = problems.watch(context.new_page())
        page.set_default_timeout(within(15) * 1000)
        page.goto(f"http://127.0.0.1:{server.port}{path}")
        return page

    yield factory
    for context in contexts:
        context.close()
    assert not problems.foreign, f"requests outside the server: {problems.foreign}"
    # A refused WebSocket while the server is down is logged by Chromium as a console error,
    # and so is the page's plain-HTTP check of /ws that follows it (refused, or a 401/426
    # answer): that is the point of the reconnect and refusal tests, so those lines are allowed.
    errors = [e for e in problems.errors if not _expected_while_offline(e)]
    assert not errors, "\n".join(errors)


def _expected_while_offline(error: str) -> bool:
    if "WebSocket connection to" in error:
        return True
    return "Failed to load resource" in error and re.search(r"/ws(\?[^ )]*)?\)$", error) is not None


@pytest.fixture
def shot(tmp_path: Path) -> Callable[[Any, str], Path]:
    """Save a full-page screenshot in the test's tmp dir (and BROWSER_SCREENSHOTS if set)."""
    keep = os.environ.get("BROWSER_SCREENSHOTS")

    def save(page: Any, name: str) -> Path:
        path = tmp_path / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        if keep:
            Path(keep).mkdir(parents=True, exist_ok=True)
            shutil.copy(path, Path(keep) / path.name)
        return path

    return save
