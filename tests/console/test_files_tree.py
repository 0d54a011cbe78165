"""Files and views in the console: upload (button, drop), the object tree, completion.

Headless Chromium against the live gunicorn of conftest.py (one server for the session, one
browser for this module).
"""

from __future__ import annotations

import json
import re
import time

import pytest
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.conftest import reference_shot
from tests.console.test_browser import (
    api,
    csp_violations,
    css,
    editor,
    run,
    sign_in,
    status_text,
    type_sql,
    visible,
)

pytestmark = pytest.mark.slow

XSS = "<img src=x onerror=window.__xss=1>"


def wait_status(driver, start: str, timeout: float = 30) -> str:
    WebDriverWait(driver, timeout).until(lambda d: status_text(d).startswith(start))
    return status_text(driver)


def tree_node(driver, kind: str, name: str, timeout: float = 15):
    """The tree's node of ``kind`` named ``name``, opened (its ancestors too); looked for
    again when the tree is drawn anew while it is searched (a node found gone stale)."""
    node = WebDriverWait(driver, timeout, ignored_exceptions=(
        StaleElementReferenceException,)).until(lambda d: [
        n for n in d.find_elements(By.CSS_SELECTOR, f"[data-testid=tree] [data-kind={kind}]")
        if n.get_attribute("data-name") == name])[0]
    driver.execute_script("for (let n = arguments[0]; n; n = n.parentElement.closest('details'))"
                          " n.open = true;", node)
    return node


def column_names(node) -> list[str]:
    return [li.get_attribute("data-name")
            for li in node.find_elements(By.CSS_SELECTOR, ":scope > .tree-columns > li")]


def tree_columns(driver, kind: str, name: str, timeout: float = 15) -> list[str]:
    """The column names under the tree's node of ``kind`` named ``name``, read again when
    the tree is drawn anew between finding the node and reading it (a statement that made a
    view refreshes the catalogue: the node found before may be gone, stale, by then)."""
    [names] = WebDriverWait(driver, timeout, ignored_exceptions=(
        StaleElementReferenceException,)).until(
        lambda d: [column_names(tree_node(d, kind, name, timeout))])
    return names


def listed_files(server) -> dict[str, dict]:
    answer = api(server, "GET", "/api/files/")
    assert answer.status_code == 200, answer.text
    return {f["name"]: f for f in answer.json()}


def drop_files(driver, selector: str, *files: tuple[str, str]) -> None:
    """A synthetic drop of files ((name, text) each: a DataTransfer holding Files) on the
    element."""
    driver.execute_script(
        "const [selector, files] = arguments;"
        "const data = new DataTransfer();"
        "for (const [name, text] of files)"
        "  data.items.add(new File([text], name, {type: 'text/csv'}));"
        "const target = document.querySelector(selector);"
        "for (const type of ['dragenter', 'dragover', 'drop'])"
        "  target.dispatchEvent(new DragEvent(type, {dataTransfer: data, bubbles: true,"
        "                                             cancelable: true, composed: true}));",
        selector, [list(f) for f in files])


def test_upload_by_button_then_replace_after_confirming(browser, console_server, tmp_path):
    sign_in(browser, console_server["url"])
    source = tmp_path / "Sales targets 2026.csv"
    source.write_text("city,target\nBerlin,10\nParis,12\n")
    css(browser, "[data-testid=upload-input]").send_keys(str(source))
    name = visible(browser, "[data-testid=upload-name]")
    # The name is the file's, made to follow the naming rule, and can be changed.
    assert name.get_attribute("value") == "Sales_targets_2026"
    name.send_keys(Keys.CONTROL, "a")
    name.send_keys("sales_targets")
    css(browser, "[data-testid=upload-submit]").click()
    assert wait_status(browser, "Uploaded") == \
        "Uploaded files.sales_targets: 2 rows, 2 columns."
    assert listed_files(console_server)["sales_targets"]["row_count"] == 2
    assert tree_columns(browser, "file", "sales_targets") == ["city", "target"]

    # The same name again: the server's refusal, and a replacement only on the user's click.
    source.write_text("city,target\nBerlin,10\nParis,12\nRome,9\n")
    css(browser, "[data-testid=upload-input]").send_keys(str(source))
    name = visible(browser, "[data-testid=upload-name]")
    name.send_keys(Keys.CONTROL, "a")
    name.send_keys("sales_targets" + Keys.ENTER)
    assert wait_status(browser, "Upload refused") == (
        "Upload refused (409): File with name 'sales_targets' already exists "
        "Replace files.sales_targets")
    assert listed_files(console_server)["sales_targets"]["row_count"] == 2  # not yet
    css(browser, "[data-testid=upload-replace]").click()
    assert wait_status(browser, "Uploaded") == \
        "Uploaded files.sales_targets: 3 rows, 2 columns."
    assert listed_files(console_server)["sales_targets"]["row_count"] == 3
    # A name the rule refuses is said before anything is sent.
    css(browser, "[data-testid=upload-input]").send_keys(str(source))
    name = visible(browser, "[data-testid=upload-name]")
    name.send_keys(Keys.CONTROL, "a")
    name.send_keys("9 lives" + Keys.ENTER)
    assert "not starting with a digit" in css(browser, "[data-testid=upload-name-error]").text
    css(browser, "[data-testid=upload-cancel]").click()
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=upload-form]")
    assert not csp_violations(browser)


def test_a_dropped_file_is_uploaded_and_its_markup_shown_as_text(browser, console_server):
    sign_in(browser, console_server["url"])
    type_sql(browser, "SELECT 1")
    # Dropped on the editor: uploaded, not pasted into the statement.
    drop_files(browser, "[data-testid=editor]", (f"{XSS}.csv", f"{XSS},<b>bold</b>\n1,2\n3,4\n"))
    form = visible(browser, "[data-testid=upload-form]")
    assert f"Upload {XSS}.csv (" in form.text
    reference_shot(browser, "upload")
    assert visible(browser, "[data-testid=upload-name]").get_attribute("value") == \
        "img_src_x_onerror_window___xss_1"
    css(browser, "[data-testid=upload-submit]").click()
    assert wait_status(browser, "Uploaded") == \
        "Uploaded files.img_src_x_onerror_window___xss_1: 2 rows, 2 columns."
    names = WebDriverWait(browser, 15, ignored_exceptions=(
        StaleElementReferenceException,)).until(lambda d: [[c.text for c in tree_node(
            d, "file", "img_src_x_onerror_window___xss_1").find_elements(
            By.CSS_SELECTOR, ".tree-column .tree-name")]])[0]
    assert names == [XSS, "<b>bold</b>"]
    # Text, never markup: no image was made, and its handler never ran.
    assert not browser.find_elements(By.CSS_SELECTOR, "#app img, #app b")
    assert browser.execute_script("return window.__xss") is None
    assert editor(browser).text == "SELECT 1"
    assert not csp_violations(browser)


def test_an_upload_shows_its_progress_and_can_be_stopped(browser, console_server, tmp_path):
    sign_in(browser, console_server["url"])
    source = tmp_path / "slow.csv"
    source.write_text("n,text\n" + "".join(f"{i},{'x' * 40}\n" for i in range(40_000)))
    # The browser sends at 200 KB/s: the 1.8 MB take seconds, and the progress shows.
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 0, "downloadThroughput": -1,
        "uploadThroughput": 200 * 1024})
    try:
        css(browser, "[data-testid=upload-input]").send_keys(str(source))
        visible(browser, "[data-testid=upload-submit]").click()
        WebDriverWait(browser, 30).until(lambda d: re.fullmatch(
            r"Uploading slow\.csv as files\.slow: [1-9]\d?% of 1\.\d MB",
            css(d, "[data-testid=upload-progress]").text))
        css(browser, "[data-testid=upload-stop]").click()
        assert wait_status(browser, "Upload of") == \
            "Upload of slow.csv stopped: nothing was stored."
    finally:
        browser.execute_cdp_cmd("Network.emulateNetworkConditions", {
            "offline": False, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    assert "slow" not in listed_files(console_server)
    # Nor a part of it on the server's disk (once the server has seen the body end).
    folder = console_server["tmp"] / "files"
    WebDriverWait(browser, 15).until(lambda _: not list(folder.glob(".upload-*")))


def test_a_malformed_file_is_refused_with_the_servers_reason(browser, console_server):
    sign_in(browser, console_server["url"])
    before = listed_files(console_server)
    # Two files dropped at once: offered one after the other.
    drop_files(browser, "[data-testid=tree]", ("ragged.csv", "a,b\n1,2\n3,4,5,6\n7,8\n"),
               ("second one.csv", "a\n1\n"))
    assert visible(browser, "[data-testid=upload-waiting]").text == "then 1 more"
    visible(browser, "[data-testid=upload-submit]").click()
    shown = wait_status(browser, "Upload refused")
    assert shown.startswith("Upload refused (422): ")
    assert re.search(r"\bline:? 3\b", shown, re.IGNORECASE), shown  # where it went wrong
    assert "error" in css(browser, "[data-testid=status]").get_attribute("class")
    assert listed_files(console_server) == before
    assert visible(browser, "[data-testid=upload-name]").get_attribute("value") == "second_one"
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=upload-waiting]")
    css(browser, "[data-testid=upload-cancel]").click()
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=upload-form]")
    assert listed_files(console_server) == before


def test_a_refused_upload_keeps_the_last_result(browser, console_server):
    sign_in(browser, console_server["url"])
    type_sql(browser, "SELECT species FROM demo.iris ORDER BY sepal_length LIMIT 3")
    run(browser)
    rows = [r.text for r in browser.find_elements(By.CSS_SELECTOR, ".grid-row")]
    assert len(rows) == 3 and css(browser, "[data-testid=grid]").is_displayed()
    drop_files(browser, "[data-testid=tree]", ("broken.json", '{"a": [1, 2'))
    visible(browser, "[data-testid=upload-submit]").click()
    shown = wait_status(browser, "Upload refused")
    assert re.match(r"Upload refused \(4\d\d\): \S", shown), shown
    assert "error" in css(browser, "[data-testid=status]").get_attribute("class")
    # The refusal is the status line's; the grid still shows the result it showed.
    assert css(browser, "[data-testid=grid]").is_displayed()
    assert [r.text for r in browser.find_elements(By.CSS_SELECTOR, ".grid-row")] == rows
    assert "species" in css(browser, ".grid-header").text


def test_the_tree_and_completion_know_files_and_views(browser, console_server):
    server = console_server
    made = api(server, "PUT", "/api/files/fleet", files={
        "file": ("fleet.csv", b"plate,seats,city\nB-1,4,Berlin\nP-2,7,Paris\n")})
    assert made.status_code == 200, made.text
    for query in ("CREATE VIEW mindsdb.big_cars AS (SELECT plate, seats FROM files.fleet "
                  "WHERE seats > 5)",
                  f"CREATE VIEW mindsdb.quoted AS (SELECT 1 AS {json.dumps(XSS)})"):
        answer = api(server, "POST", "/api/sql/query", json={"query": query})
        assert answer.json()["type"] == "ok", answer.text
    sign_in(browser, server["url"])
    assert tree_columns(browser, "file", "fleet") == ["plate", "seats", "city"]
    assert tree_columns(browser, "view", "big_cars") == ["plate", "seats"]
    view = tree_node(browser, "view", "big_cars")
    quoted = tree_node(browser, "view", "quoted")
    assert [c.text for c in quoted.find_elements(By.CSS_SELECTOR, ".tree-column")] == [XSS]
    assert not browser.find_elements(By.CSS_SELECTOR, "#app img")
    type_sql(browser, "SELECT city, count(*) FROM files.fleet GROUP BY city")
    run(browser)
    reference_shot(browser, "files")

    def offered(text: str) -> list[str]:
        type_sql(browser, text)
        time.sleep(0.2)  # CodeMirror opens its list after the keystroke's update
        host = css(browser, "[data-testid=editor]")
        options = WebDriverWait(browser, 15).until(lambda _: host.shadow_root.find_elements(
            By.CSS_SELECTOR, ".cm-tooltip-autocomplete li .cm-completionLabel"))
        return [o.text for o in options]

    assert "fleet" in offered("SELECT * FROM files.fl")
    assert "big_cars" in offered("SELECT * FROM mindsdb.big")
    assert "seats" in offered("SELECT mindsdb.big_cars.se")
    assert "city" in offered("SELECT files.fleet.ci")

    # A double click on a name in the tree writes it at the caret, qualified and quoted.
    type_sql(browser, "SELECT * FROM ")
    ActionChains(browser).double_click(view.find_element(By.TAG_NAME, "summary")).perform()
    quoted_column = quoted.find_element(By.CSS_SELECTOR, ".tree-column")
    editor(browser).send_keys(" WHERE ")
    ActionChains(browser).double_click(quoted_column).perform()
    assert editor(browser).text == f"SELECT * FROM mindsdb.big_cars WHERE `{XSS}`"

    # A view made in the editor joins the tree when it is made.
    type_sql(browser, "CREATE VIEW mindsdb.paris AS (SELECT city FROM files.fleet "
                      "WHERE city = 'Paris')")
    run(browser)
    assert tree_columns(browser, "view", "paris") == ["city"]
