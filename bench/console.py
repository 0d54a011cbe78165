"""The console in a real browser: first-load bytes and time to interactive, 100 000 rows drawn.

    .venv/bin/python bench/console.py [--runs 5]

Serves Quarry with gunicorn (sign-in off, a SQLite source `big` of 100 000 rows × 3 columns),
opens the console in headless Chromium (Debian's /usr/bin/chromium and chromedriver) and reads
the browser's own Performance API:

- first load: the sum of `transferSize` (bytes on the wire, compressed) of the page and every
  resource it loaded, on a cold cache;
- interactive: from navigation start until the editor exists and accepts input: the
  `quarry:interactive` mark the page sets once the SQL view and its editor are drawn and
  focused (the bench also polls for CodeMirror's content element every 20 ms and checks it is
  there); also `domContentLoadedEventEnd` for comparison;
- 100 000 rows: the `quarry:grid` measure the console records around the grid's drawing of
  an answer (column widths, header, the visible rows), and the request's round trip.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import statistics
import sys
import tempfile
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import WebDriverWait

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _server import migrate, quarry_env, serving  # noqa: E402

ROWS = 100_000
QUERY = "SELECT id, label, value FROM big.numbers ORDER BY id"


def _driver() -> webdriver.Chrome:
    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000"):
        options.add_argument(arg)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


def _first_load(driver: webdriver.Chrome, url: str) -> dict[str, float]:
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.clearBrowserCache", {})
    driver.get(url + "/")
    host = WebDriverWait(driver, 30, poll_frequency=0.02).until(
        lambda d: d.find_element(By.CSS_SELECTOR, "[data-testid=editor]"))
    WebDriverWait(driver, 30, poll_frequency=0.02).until(
        lambda _: host.shadow_root.find_elements(By.CSS_SELECTOR, ".cm-content"))
    return driver.execute_script("""
        const nav = performance.getEntriesByType('navigation')[0];
        const res = performance.getEntriesByType('resource')
            .filter((r) => r.name.includes('/console/static/'));
        const [ready] = performance.getEntriesByName('quarry:interactive');
        return {bytes: nav.transferSize + res.reduce((a, r) => a + r.transferSize, 0),
                decoded: nav.decodedBodySize + res.reduce((a, r) => a + r.decodedBodySize, 0),
                interactive_ms: ready ? ready.startTime : null, polled_ms: performance.now(),
                dom_content_loaded_ms: nav.domContentLoadedEventEnd};""")


def _rows(driver: webdriver.Chrome) -> dict[str, float]:
    return driver.execute_async_script("""
        const done = arguments[arguments.length - 1];
        const t0 = performance.now();
        fetch('/api/sql/query', {method: 'POST', headers: {'Content-Type': 'application/json'},
                                 body: JSON.stringify({query: arguments[0]})})
          .then((r) => r.json()).then(() => done({fetch_ms: performance.now() - t0}));
    """, QUERY) | _draw(driver)


def _draw(driver: webdriver.Chrome) -> dict[str, float]:
    # Run through the page itself (the SQL view's Run), then read its measure.
    host = driver.find_element(By.CSS_SELECTOR, "[data-testid=editor]")
    content = host.shadow_root.find_element(By.CSS_SELECTOR, ".cm-content")
    content.click()
    ActionChains(driver).key_down(Keys.CONTROL).send_keys("a").key_up(Keys.CONTROL) \
        .send_keys(Keys.DELETE).perform()
    content.send_keys(QUERY)
    driver.execute_script("performance.clearMeasures('quarry:grid');")
    driver.find_element(By.CSS_SELECTOR, "[data-testid=run]").click()
    WebDriverWait(driver, 120).until(lambda d: d.execute_script(
        "return performance.getEntriesByName('quarry:grid').length") > 0)
    return {"draw_ms": driver.execute_script(
        "return performance.getEntriesByName('quarry:grid').at(-1).duration"),
        "rows_in_page": driver.execute_script(
        "return document.querySelectorAll('.grid-row').length")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="quarry-bench-console-"))
    with sqlite3.connect(tmp / "big.db") as conn:
        conn.execute("CREATE TABLE numbers (id INTEGER PRIMARY KEY, label TEXT, value REAL)")
        conn.executemany("INSERT INTO numbers VALUES (?, ?, ?)",
                         ((i, f"row {i}", i / 7) for i in range(1, ROWS + 1)))
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                     QUARRY_INSTANCE_PATH=str(tmp),
                     QUARRY_DATA_SOURCES=json.dumps({"big": f"sqlite:///{tmp}/big.db"}))
    migrate(env)
    loads, draws = [], []
    with serving(env, tmp) as server:
        for _ in range(args.runs):
            driver = _driver()
            try:
                loads.append(_first_load(driver, server.url))
                draws.append(_rows(driver))
            finally:
                driver.quit()
    # A page without the mark (an older build) has only the polled time.
    med = lambda rows, key: statistics.median(  # noqa: E731
        [r[key] for r in rows if r[key] is not None] or [float("nan")])
    print(f"runs: {args.runs} (medians)")
    print(f"first load, compressed on the wire: {med(loads, 'bytes') / 1024:.1f} KiB "
          f"(decoded {med(loads, 'decoded') / 1024:.1f} KiB)")
    print(f"interactive (editor ready): {med(loads, 'interactive_ms'):.0f} ms "
          f"(found by polling at {med(loads, 'polled_ms'):.0f} ms); "
          f"DOMContentLoaded {med(loads, 'dom_content_loaded_ms'):.0f} ms")
    print(f"{ROWS} rows: request {med(draws, 'fetch_ms'):.0f} ms, grid drawn in "
          f"{med(draws, 'draw_ms'):.0f} ms, rows in the page {med(draws, 'rows_in_page'):.0f}")


if __name__ == "__main__":
    main()
