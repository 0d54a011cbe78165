"""A live Quarry (gunicorn, sign-in on) and a headless Chromium driven by Selenium.

Chromium and chromedriver come from Debian (`apt-get install chromium chromium-driver`;
.ci/run installs them). Without them the browser tests are skipped with a reason that
pytest prints (-ra) — never silently. A failing browser test leaves a screenshot under
build/screenshots/; QUARRY_CONSOLE_SCREENSHOTS=docs/console makes the tests (re)draw the
reference pictures there.
"""

from __future__ import annotations

import json
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography.fernet import Fernet
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.chrome.service import Service

from app import create_app
from app.config import load_settings
from app.extensions import db
from tests.conftest import pg_database
from tests.live import ROOT, flask, quarry_env, serving

CHROMIUM = os.environ.get("QUARRY_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("QUARRY_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")
USER, PASSWORD = "alice", "console test password"
SECRET_KEY = "console-test-secret-" + "k" * 32
BIG_ROWS = 100_000
FAILURE_SHOTS = ROOT / "build" / "screenshots"


def browser_missing() -> str | None:
    for path in (CHROMIUM, CHROMEDRIVER):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            return (f"BROWSER TESTS SKIPPED: {path} is missing; install Debian's chromium and "
                    "chromium-driver (apt-get install chromium chromium-driver)")
    return None


def _big_sqlite(path: Path) -> None:
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE numbers (id INTEGER PRIMARY KEY, label TEXT, value REAL)")
        conn.executemany("INSERT INTO numbers VALUES (?, ?, ?)",
                         ((i, f"row {i}", i / 7) for i in range(1, BIG_ROWS + 1)))


def _add_user_and_token(env: dict) -> str:
    app = create_app(load_settings(env))
    runner = app.test_cli_runner()
    # An admin: the test's data sources (big, pg) are private, and a member would need a
    # grant on each (tests/auth/test_access.py covers what members may query).
    created = runner.invoke(args=["users", "create", USER, "--admin"], input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    made = runner.invoke(args=["tokens", "create", "--user", USER, "--label", "console"])
    assert made.exit_code == 0, made.output
    with app.app_context():
        db.engine.dispose()
    return made.stdout.strip()


@pytest.fixture(scope="session")
def console_server(tmp_path_factory, session_dir) -> Iterator[dict]:
    if reason := browser_missing():
        pytest.skip(reason)
    tmp = tmp_path_factory.mktemp("console")
    _big_sqlite(tmp / "big.db")
    with pg_database("quarry_console") as pg_url:
        env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                         QUARRY_INSTANCE_PATH=str(tmp), QUARRY_AUTH_REQUIRED="true",
                         QUARRY_DEMO_PATH=f"{session_dir}/demo.db",
                         QUARRY_SECRET_KEY=SECRET_KEY, QUARRY_WORKERS="2", QUARRY_THREADS="4",
                         QUARRY_SQL_TIMEOUT_S="30",
                         QUARRY_ENCRYPTION_KEY=Fernet.generate_key().decode(),
                         QUARRY_DATA_SOURCES=json.dumps({"big": f"sqlite:///{tmp}/big.db",
                                                         "pg": pg_url}))
        flask(env, "db", "upgrade")
        token = _add_user_and_token(env)
        with serving(env, tmp) as live:
            yield {"url": live.url, "token": token, "pg_url": pg_url, "tmp": tmp}
    # Its workers stopped by themselves: none was held past graceful_timeout and killed (a
    # worker's exit once waited on DuckDB's threads, 60 s a stop, once the console's tests
    # had used the engine).
    log = (tmp / "stderr.log").read_text()
    assert "SIGKILL" not in log and "Worker exiting" in log, log[-3000:]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="module")
def chromium(console_server, tmp_path_factory) -> Iterator:
    """One headless Chromium for a module's tests (each test starts signed out)."""
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run"):
        options.add_argument(arg)
    downloads = tmp_path_factory.mktemp("downloads")
    options.add_experimental_option("prefs", {"download.default_directory": str(downloads),
                                              "download.prompt_for_download": False})
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.downloads = downloads
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture
def browser(chromium, console_server, request) -> Iterator:
    """The module's browser, signed out with empty storage; a screenshot if the test fails."""
    chromium.get_log("browser")  # what earlier tests logged is theirs
    try:
        yield chromium
    finally:
        report = getattr(request.node, "report_call", None)
        if report is not None and report.failed:
            FAILURE_SHOTS.mkdir(parents=True, exist_ok=True)
            shot = FAILURE_SHOTS / f"{request.node.name}.png"
            chromium.save_screenshot(str(shot))
            print(f"screenshot of the failure: {shot}")
        _reset(chromium, console_server["url"])


def _reset(driver, url: str) -> None:
    try:
        driver.switch_to.alert.dismiss()
    except NoAlertPresentException:
        pass
    driver.get(url + "/console/static/LICENSES.txt")  # same origin, no script of the console
    driver.execute_script("window.localStorage.clear()")
    driver.delete_all_cookies()
    for leftover in driver.downloads.iterdir():
        leftover.unlink()


def reference_shot(driver, name: str) -> None:
    """Save a reference picture when QUARRY_CONSOLE_SCREENSHOTS names a folder."""
    if folder := os.environ.get("QUARRY_CONSOLE_SCREENSHOTS"):
        target = ROOT / folder
        target.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(target / f"{name}.png"))

