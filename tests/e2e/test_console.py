"""The operators' console in a real browser — Debian's chromium, driven by Selenium
through Debian's chromedriver — against `make run`'s stack (devtools/devstack.py): an operator
signs in, sees a job created meanwhile appear and finish, reads its timeline, cancels a running
job, retries every failed job a filter selects after seeing their count, and finds each action in
the audit log; a viewer sees every page and is refused every action; a form without the session
cookie, or from another site, is refused; snapshot text is shown as text. Each page's screenshot
is written to docs/console/."""

from __future__ import annotations

import json
import os
import re
import shutil
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from aijob.client import BlockingJobsClient
from tests.support.stack import ROOT, Stack, running_stack

pytest.importorskip("selenium")
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
SCREENSHOTS = ROOT / "docs" / "console"
WAIT_S = 60

#: .ci/run installs the browser and sets this: there, its absence fails the run.
REQUIRED = os.environ.get("AIJOB_REQUIRE_BROWSER") == "1"
pytestmark = pytest.mark.skipif(
    not REQUIRED and not (shutil.which(CHROMIUM) and shutil.which(CHROMEDRIVER)),
    reason="Debian's chromium and chromium-driver are not installed (.ci/run installs them)",
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with running_stack(tmp_path_factory.mktemp("console")) as started:
        yield started


@pytest.fixture
def browser(tmp_path: Path) -> Iterator[Any]:
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--window-size=1400,1000",
        f"--user-data-dir={tmp_path / 'chromium'}",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def _token(stack: Stack, role: str) -> str:
    """`make run`'s development token of ``role`` (it writes one per role, viewer included)."""
    tokens = json.loads((stack.cwd / ".aijob" / "dev-tokens.json").read_text())
    return str(tokens[role])


def _sign_in(driver: Any, stack: Stack, token: str) -> None:
    driver.get(f"{stack.console}/")
    assert driver.current_url.endswith("/login")  # no session: the sign-in page
    driver.find_element(By.ID, "token").send_keys(token)
    driver.find_element(By.ID, "sign-in").click()
    _until(driver, lambda d: d.find_elements(By.ID, "overview"))


def _until(driver: Any, condition: Any) -> Any:
    """The browser is another process: wait for what it shows (bounded)."""
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.1).until(condition)


def _shown(driver: Any, selector: str) -> str:
    """The text of what ``selector`` matches now ("" when nothing does). live.js swaps a live
    part's HTML every 2 s, so an element handle found in one WebDriver call can be gone by the
    next (stale): the lookup and the read are one script, one step in the browser."""
    text = driver.execute_script(
        "const found = document.querySelector(arguments[0]);"
        "return found === null ? '' : found.innerText;",
        selector,
    )
    return str(text).strip()


def _text(driver: Any, element_id: str) -> str:
    return _shown(driver, f"#{element_id}")


def _all_shown(driver: Any, selector: str) -> list[str]:
    texts = driver.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]), (e) => e.innerText.trim());",
        selector,
    )
    return [str(text) for text in texts]


def _follow(driver: Any, selector: str) -> None:
    """Follow the link ``selector`` matches inside a live part: its href is read in one browser
    step (a click on a handle found a step earlier can meet a part swapped meanwhile)."""
    href = _until(
        driver,
        lambda d: d.execute_script(
            "const link = document.querySelector(arguments[0]); return link && link.href;",
            selector,
        ),
    )
    driver.get(href)


def _shot(driver: Any, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))


class Jobs:
    """The job API for the tests' users, through the public blocking client."""

    def __init__(self, stack: Stack) -> None:
        self._stack = stack
        self._clients: dict[str, BlockingJobsClient] = {}

    def _of(self, user: str) -> BlockingJobsClient:
        if user not in self._clients:
            tokens = json.loads((self._stack.cwd / ".aijob" / "dev-tokens.json").read_text())
            self._clients[user] = BlockingJobsClient(
                self._stack.env["AIJOB_LISTEN"], user_id=user, token=tokens["service"]
            )
        return self._clients[user]

    def create(self, user: str, text: str, count: int = 1) -> list[str]:
        client = self._of(user)
        return [client.create("synthetic_echo", {"text": text}).job_id for _ in range(count)]

    def status(self, user: str, job_id: str) -> str:
        return str(self._of(user).get(job_id).lifecycle_status)

    def close(self) -> None:
        for client in self._clients.values():
            client.close()


@pytest.fixture
def jobs(stack: Stack) -> Iterator[Jobs]:
    made = Jobs(stack)
    try:
        yield made
    finally:
        made.close()


def test_an_operator_works_the_console(stack: Stack, browser: Any, jobs: Jobs) -> None:
    driver = browser
    _sign_in(driver, stack, _token(stack, "admin"))

    # A job created while the jobs page is open appears there and finishes.
    driver.get(f"{stack.console}/jobs?user_id=console-user")
    (job_id,) = jobs.create("console-user", "hello scripted-fault=latency:2500")
    row = f"tr[data-job-id='{job_id}']"
    _until(driver, lambda d: _shown(d, row))
    _until(driver, lambda d: "succeeded" in _shown(d, row))
    _shot(driver, "jobs")

    # Its page: the timeline names its events and the attempt's runtime.
    _follow(driver, f"{row} a[href$='/jobs/{job_id}']")
    _until(driver, lambda d: _text(d, "job-status") == "succeeded")
    timeline = _text(driver, "timeline")
    assert "ai.job.enqueue" in timeline and "ai.job.completed" in timeline
    assert re.search(r"attempt ended\s+1\s+dev-runtime-\d", timeline), timeline
    _shot(driver, "job")

    # Cancel a running job, behind its confirmation.
    (running,) = jobs.create("console-user", "stuck scripted-fault=hang")
    driver.get(f"{stack.console}/jobs/{running}")
    _until(driver, lambda d: _text(d, "job-status") == "running")
    _follow(driver, "#cancel-job")
    _until(driver, lambda d: d.find_elements(By.ID, "confirm"))
    _shot(driver, "confirm")
    driver.find_element(By.ID, "confirm").click()
    assert "cancel_requested" in _until(driver, lambda d: _text(d, "outcome"))
    _until(driver, lambda _: jobs.status("console-user", running) == "cancelled")

    # Retry every failed job of one type a filter selects, after seeing how many.
    failed = jobs.create("console-bulk", "refused scripted-fault=401", count=3)
    for job in failed:
        _until(driver, lambda _, job=job: jobs.status("console-bulk", job) == "failed")
    driver.get(
        f"{stack.console}/jobs?user_id=console-bulk&job_type=synthetic_echo&lifecycle_status=failed"
    )
    driver.find_element(By.ID, "bulk-retry").click()
    assert _until(driver, lambda d: _text(d, "selected-count")) == "3"
    driver.find_element(By.ID, "confirm").click()
    assert _until(driver, lambda d: _text(d, "outcome")).startswith("retried 3 jobs")

    # Each action is in the audit log, with who did it.
    driver.get(f"{stack.console}/audit")
    actions = _all_shown(driver, "#audit td.action")
    assert actions.count("RetryJob") == 3 and actions.count("CancelJob") == 1, actions
    _shot(driver, "audit")

    for page, name in (
        ("/", "overview"),
        ("/users?user_id=console-user", "users"),
        ("/limits", "limits"),
    ):
        driver.get(f"{stack.console}{page}")
        _shot(driver, name)
    driver.get(f"{stack.console}/job-types")
    _shot(driver, "job-types")


def test_a_viewer_sees_every_page_and_is_refused_every_action(
    stack: Stack, browser: Any, jobs: Jobs
) -> None:
    driver = browser
    _sign_in(driver, stack, _token(stack, "viewer"))
    (job_id,) = jobs.create("console-viewer", "<script>window.injected = 1</script>")
    for page in ("/", "/jobs", f"/jobs/{job_id}", "/users?user_id=u", "/limits", "/job-types"):
        driver.get(f"{stack.console}{page}")
        assert not driver.find_elements(By.ID, "refusal"), page
    driver.get(f"{stack.console}/audit")
    assert not driver.find_elements(By.ID, "refusal")

    # Snapshot text is shown as text: the script is on the page as characters, never run.
    driver.get(f"{stack.console}/jobs/{job_id}")
    assert "<script>window.injected = 1</script>" in _text(driver, "snapshot")
    assert driver.execute_script("return window.injected") is None

    for action in (
        f"cancel?job_id={job_id}",
        f"retry?job_id={job_id}",
        "bulk-cancel?user_id=console-viewer",
        "redrive",
        "limit?model=deepseek-v4-flash&max_concurrency=3",
        "budget?user_id=u&daily_tokens=5",
        "reset-breaker?model=deepseek-v4-flash",
    ):
        driver.get(f"{stack.console}/confirm/{action}")
        driver.find_element(By.ID, "confirm").click()
        refusal = _until(driver, lambda d: _text(d, "refusal"))
        assert "PERMISSION_DENIED" in refusal, (action, refusal)


def _post(url: str, data: dict[str, str], headers: dict[str, str]) -> int:
    request = urllib.request.Request(
        url, data=urllib.parse.urlencode(data).encode(), headers=headers, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


def _session_cookie(stack: Stack, role: str) -> str:
    """Sign in as a browser does (a form POST) and return the session's cookie."""
    request = urllib.request.Request(
        f"{stack.console}/login",
        data=urllib.parse.urlencode({"token": _token(stack, role)}).encode(),
        method="POST",
    )

    class Stay(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args: Any) -> None:
            return None

    try:
        urllib.request.build_opener(Stay).open(request, timeout=30)
    except urllib.error.HTTPError as answer:
        assert answer.code == 303
        set_cookie = answer.headers["Set-Cookie"]
    else:
        raise AssertionError("sign-in did not answer with a redirect")
    return str(set_cookie.split(";", 1)[0])


def test_a_form_without_the_cookie_or_from_another_site_is_refused(stack: Stack) -> None:
    cookie = _session_cookie(stack, "admin")
    confirm = urllib.request.Request(f"{stack.console}/confirm/redrive", headers={"Cookie": cookie})
    with urllib.request.urlopen(confirm, timeout=30) as answer:
        page = answer.read().decode()
    match = re.search(r'name="csrf" value="([0-9a-f]+)"', page)
    assert match, page
    csrf = match.group(1)
    url = f"{stack.console}/actions/redrive"
    assert _post(url, {"csrf": csrf}, {}) == 403  # no cookie
    assert _post(url, {"csrf": "0" * 64}, {"Cookie": cookie}) == 403  # a forged form
    forged = {"Cookie": cookie, "Origin": "http://evil.example"}
    assert _post(url, {"csrf": csrf}, forged) == 403  # from another site
    assert _post(url, {"csrf": csrf}, {"Cookie": cookie}) == 200  # the console's own form


def test_a_session_cookie_is_not_the_token_and_dies_with_sign_out(
    stack: Stack, browser: Any
) -> None:
    driver = browser
    token = _token(stack, "admin")
    _sign_in(driver, stack, token)
    (cookie,) = [c for c in driver.get_cookies() if c["name"] == "aijob_console"]
    assert token not in cookie["value"] and cookie["httpOnly"] and cookie["sameSite"] == "Strict"
    driver.get(f"{stack.console}/confirm/redrive")
    csrf = driver.find_element(By.NAME, "csrf").get_attribute("value")
    driver.find_element(By.ID, "sign-out").click()
    _until(driver, lambda d: d.current_url.endswith("/login"))
    # The value the browser held, replayed after sign-out, acts for nobody.
    replayed = {"Cookie": f"aijob_console={cookie['value']}"}
    assert _post(f"{stack.console}/actions/redrive", {"csrf": csrf}, replayed) == 403
