"""The console as a person uses it: headless Chromium against a live gunicorn."""

from __future__ import annotations

import csv
import io
import time

import psycopg
import pytest
import requests
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.conftest import BIG_ROWS, PASSWORD, USER, reference_shot

pytestmark = pytest.mark.slow


def css(driver, selector: str, timeout: float = 15):
    return WebDriverWait(driver, timeout).until(
        ec.presence_of_element_located((By.CSS_SELECTOR, selector)))


def visible(driver, selector: str, timeout: float = 15):
    return WebDriverWait(driver, timeout).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, selector)))


def sign_in(driver, url: str) -> None:
    driver.get(url + "/")
    form = visible(driver, "form[data-testid=sign-in]")
    form.find_element(By.NAME, "username").send_keys(USER)
    form.find_element(By.NAME, "password").send_keys(PASSWORD + Keys.ENTER)
    editor(driver)


def editor(driver, selector: str = ".cm-content", timeout: float = 15):
    """An element of the editor (it lives in a shadow root: see web/src/editor.js)."""
    host = css(driver, "[data-testid=editor]", timeout)
    return WebDriverWait(driver, timeout).until(
        lambda _: host.shadow_root.find_elements(By.CSS_SELECTOR, selector))[0]


def type_sql(driver, text: str) -> None:
    content = editor(driver)
    content.click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL) \
        .send_keys(Keys.DELETE).perform()
    assert content.text.strip() == ""
    content.send_keys(text)


def run(driver, timeout: float = 30) -> None:
    editor(driver).click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys(Keys.ENTER).key_up(Keys.CONTROL).perform()
    WebDriverWait(driver, timeout).until(lambda d: d.find_element(
        By.CSS_SELECTOR, "[data-testid=status]").get_attribute("class") != "status running")


def status_text(driver) -> str:
    return css(driver, "[data-testid=status]").text


def api(server, method: str, path: str, **kwargs) -> requests.Response:
    return requests.request(method, server["url"] + path, timeout=60,
                            headers={"Authorization": f"Bearer {server['token']}"}, **kwargs)


def csp_violations(driver) -> list[str]:
    return [e["message"] for e in driver.get_log("browser")
            if "Content Security Policy" in e["message"] or "Refused to" in e["message"]]


def test_sign_in_complete_a_table_and_run(browser, console_server):
    browser.get(console_server["url"] + "/console")
    reference_shot(browser, "sign-in")
    sign_in(browser, console_server["url"])
    # The schema arrives after the page: wait until the completion knows demo's tables.
    WebDriverWait(browser, 15).until(lambda d: d.find_elements(
        By.CSS_SELECTOR, "select[data-testid=db] option[value=demo]"))
    type_sql(browser, "SELECT * FROM demo.iri")
    option = editor(browser, ".cm-tooltip-autocomplete li[aria-selected]")
    assert option.text.startswith("iris")
    editor(browser).send_keys(Keys.ENTER)
    editor(browser).send_keys(" WHERE species = 'setosa' LIMIT 7")
    assert "demo.iris WHERE" in editor(browser).text
    run(browser)
    assert status_text(browser).startswith("7 rows")
    header = css(browser, ".grid-header").text
    assert "sepal_length" in header and "float" in header and "text" in header
    reference_shot(browser, "sql")
    # A bad statement: its code and message next to the statement.
    type_sql(browser, "SELECT nope FROM demo.iris")
    run(browser)
    assert css(browser, "[data-testid=error-code]").text.startswith("Error ")
    assert "nope" in css(browser, "[data-testid=error-message]").text
    assert csp_violations(browser) == []
    # The history on the server has both, newest first, and finds them by text.
    history = api(console_server, "GET", "/api/console/history",
                  params={"q": "demo.iris"}).json()
    assert history[0]["outcome"] == "error" and history[1]["row_count"] == 7


def test_tabs_survive_a_reload(browser, console_server):
    sign_in(browser, console_server["url"])
    css(browser, "[data-testid=new-tab]").click()
    type_sql(browser, "SELECT 42 AS answer")
    tabs = len(browser.find_elements(By.CSS_SELECTOR, ".tab:not(.add)"))
    browser.refresh()
    editor(browser)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".tab:not(.add)")) == tabs
    assert "SELECT 42 AS answer" in editor(browser).text


def test_a_hundred_thousand_rows_scroll(browser, console_server):
    sign_in(browser, console_server["url"])
    type_sql(browser, "SELECT id, label, value FROM big.numbers ORDER BY id")
    run(browser, timeout=60)
    assert status_text(browser).startswith(f"{BIG_ROWS:,} rows")
    drawn = browser.execute_script(
        "return performance.getEntriesByName('quarry:grid').at(-1).duration")
    assert drawn < 1000, f"rendering {BIG_ROWS} rows took {drawn:.0f} ms"
    grid = css(browser, "[data-testid=grid]")
    # Only the rows in view exist in the page ...
    assert len(browser.find_elements(By.CSS_SELECTOR, ".grid-row")) < 100
    # ... and scrolling to the end shows the last row.
    browser.execute_script("arguments[0].scrollTop = arguments[0].scrollHeight", grid)
    WebDriverWait(browser, 5).until(lambda d: f"row {BIG_ROWS}" in grid.text)
    assert len(browser.find_elements(By.CSS_SELECTOR, ".grid-row")) < 100
    reference_shot(browser, "rows")


def test_export_csv_is_the_apis_answer(browser, console_server):
    query = "SELECT id, label, value FROM big.numbers WHERE id <= 5000 ORDER BY id"
    expected = api(console_server, "POST", "/api/sql/query",
                   json={"query": query, "response_format": "csv"})
    if not expected.headers["Content-Type"].startswith("text/csv"):
        pytest.skip("EXPORT TEST SKIPPED: this server answers no CSV yet (response_format "
                    "comes with the streaming branch, issue 13)")
    sign_in(browser, console_server["url"])
    type_sql(browser, query)
    run(browser)
    css(browser, "[data-testid=export-csv]").click()
    target = browser.downloads / "result.csv"
    WebDriverWait(browser, 30).until(lambda _: target.exists() and target.stat().st_size > 0)
    # Bytes, not read_text(): universal newlines would turn RFC 4180's CRLF into LF.
    exported = target.read_bytes().decode("utf-8")
    assert exported == expected.text
    rows = list(csv.reader(io.StringIO(exported)))
    assert rows[0] == ["id", "label", "value"] and len(rows) == 5001


def test_stop_cancels_in_the_database(browser, console_server):
    if api(console_server, "GET", "/api/sql/queries").status_code == 404:
        pytest.skip("STOP TEST SKIPPED: this server has no cancel endpoint yet "
                    "(DELETE /api/sql/queries/<id> comes with the streaming branch, issue 13)")
    sign_in(browser, console_server["url"])
    css(browser, "select[data-testid=db] option[value=pg]")
    type_sql(browser, "SELECT pg_sleep(25) AS slept")
    Select = browser.find_element(By.CSS_SELECTOR, "select[data-testid=db]")
    Select.send_keys("pg")
    css(browser, "[data-testid=run]").click()

    def sleeping() -> int:
        with psycopg.connect(console_server["pg_url"].replace("+psycopg", ""),
                             autocommit=True) as conn:
            # Rows come through a server-side cursor: the backend's query text is the
            # FETCH, so the sleep is found by its wait event in the source's database.
            return conn.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                "AND wait_event = 'PgSleep' AND datname = current_database() "
                                "AND pid <> pg_backend_pid()").fetchone()[0]

    deadline = time.monotonic() + 15
    while sleeping() == 0:
        assert time.monotonic() < deadline, "the statement never started"
        time.sleep(0.2)
    WebDriverWait(browser, 5).until(lambda d: d.find_element(
        By.CSS_SELECTOR, "[data-testid=elapsed]").text.endswith(" s"))
    css(browser, "[data-testid=stop]").click()
    deadline = time.monotonic() + 5
    while sleeping():
        assert time.monotonic() < deadline, "the statement still runs after Stop"
        time.sleep(0.2)
    WebDriverWait(browser, 10).until(lambda d: "error" in d.find_element(
        By.CSS_SELECTOR, "[data-testid=status]").get_attribute("class"))


def test_train_a_model_and_see_its_importances(browser, console_server):
    sign_in(browser, console_server["url"])
    type_sql(browser, "CREATE MODEL mindsdb.console_iris FROM demo (SELECT * FROM iris) "
                      "PREDICT species")
    run(browser)
    deadline = time.monotonic() + 120
    while api(console_server, "GET", "/api/projects/mindsdb/models/console_iris"
              ).json()["status"] != "complete":
        assert time.monotonic() < deadline, "training did not finish"
        time.sleep(1)
    css(browser, "button[data-view=projects]").click()
    row = css(browser, "tr[data-model=console_iris]")
    assert "complete" in row.text
    row.find_element(By.TAG_NAME, "button").click()
    chart = visible(browser, "svg[data-testid=importance-chart]", timeout=30)
    bars = chart.find_elements(By.CSS_SELECTOR, "rect")
    assert len(bars) == 4
    expected = api(console_server, "GET", "/api/projects/mindsdb/models/console_iris/describe"
                   ).json()[0]["column_importances"]
    labels = [t.text for t in chart.find_elements(By.CSS_SELECTOR, "text.chart-label")]
    assert labels == sorted(expected, key=expected.get, reverse=True)
    assert css(browser, "table[data-testid=candidates]").text.count("yes") == 1
    # The predict form comes from the model's inputs.
    form = css(browser, "form[data-testid=predict-form]")
    for name, value in (("sepal_length", "5.1"), ("sepal_width", "3.5"),
                        ("petal_length", "1.4"), ("petal_width", "0.2")):
        form.find_element(By.NAME, name).send_keys(value)
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    WebDriverWait(browser, 15).until(lambda d: "species:" in d.find_element(
        By.CSS_SELECTOR, "[data-testid=prediction]").text)
    reference_shot(browser, "model")
    assert csp_violations(browser) == []


def test_a_bad_skill_field_is_named_beside_it(browser, console_server):
    sign_in(browser, console_server["url"])
    css(browser, "button[data-view=projects]").click()
    css(browser, "[data-testid=new-skill]").click()
    form = visible(browser, "form[data-testid=skill-form]")
    form.find_element(By.NAME, "name").send_keys("bad name!")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    error = visible(browser, "form[data-testid=skill-form] .field-error[data-field=name]")
    assert "Invalid name" in error.text
    assert api(console_server, "GET", "/api/projects/mindsdb/skills").json() == []
    reference_shot(browser, "skill-error")
    # Fixed, the same form creates it; the table lists it.
    name = form.find_element(By.NAME, "name")
    name.clear()
    name.send_keys("console_skill")
    form.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
    visible(browser, "table[data-testid=skill-table] tr[data-name=console_skill]")
    assert [s["name"] for s in api(console_server, "GET", "/api/projects/mindsdb/skills").json()
            ] == ["console_skill"]
    api(console_server, "DELETE", "/api/projects/mindsdb/skills/console_skill")
