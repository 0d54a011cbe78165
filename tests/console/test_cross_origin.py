"""A page on another origin cannot act with the user's session, in a real Chromium.

The hostile page is served from another port of the same host as Quarry: the same *site*
(so SameSite=Lax lets the browser send Quarry's cookie with it) but another *origin*, so what
refuses it is the Fetch-Metadata check (Sec-Fetch-Site: same-site), not the cookie's
attribute. It posts by ``fetch`` with credentials and by auto-submitted HTML forms; afterwards
the test checks over HTTP that nothing changed and that the very same bodies, sent by a
program with the same cookie, would have worked.
"""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from functools import partial
from html import escape
from pathlib import Path

import pytest
import requests
from selenium.webdriver.support.ui import WebDriverWait

from tests.console.conftest import PASSWORD, USER

pytestmark = pytest.mark.slow

# Bodies a page can send without a CORS preflight: text/plain, which Quarry reads as JSON
# whatever the Content-Type says (as MindsDB's clients need).
FETCH_PROJECT = {"name": "xo_by_fetch"}
FORM_STATEMENT = "CREATE PROJECT xo_by_form"


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


def _pages(folder: Path, quarry: str) -> None:
    (folder / "fetch.html").write_text(f"""<!doctype html><title>waiting</title><script>
const post = (path, body) => fetch({json.dumps(quarry)} + path, {{
  method: 'POST', credentials: 'include', headers: {{'Content-Type': 'text/plain'}}, body}})
  .then(r => 'answered ' + r.status, e => 'failed ' + e.name);
Promise.all([post('/api/projects', {json.dumps(json.dumps(FETCH_PROJECT))}),
             post('/api/logout', '')])
  .then(outcomes => {{ document.title = 'done: ' + outcomes.join(', '); }});
</script>""")
    # text/plain form encoding writes name=value: the name opens a JSON document and the
    # value closes it, so Quarry would read {{"query": …, "pad": "="}}.
    name = escape(json.dumps({"query": FORM_STATEMENT, "pad": ""})[:-2], quote=True)
    (folder / "form.html").write_text(f"""<!doctype html><title>form</title>
<form method="post" enctype="text/plain" action="{quarry}/api/sql/query">
<input type="hidden" name="{name}" value='"}}'></form>
<script>document.forms[0].submit();</script>""")
    (folder / "logout.html").write_text(f"""<!doctype html><title>form</title>
<form method="post" action="{quarry}/api/logout"></form>
<script>document.forms[0].submit();</script>""")


@pytest.fixture(scope="module")
def elsewhere(console_server, tmp_path_factory) -> Iterator[str]:
    """A plain web server on another port of 127.0.0.1 serving the hostile pages."""
    folder = tmp_path_factory.mktemp("elsewhere")
    _pages(folder, console_server["url"])
    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), partial(_QuietHandler, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def _same_origin_fetch(driver, method: str, path: str, body: dict | None = None) -> int:
    """Status of a request the page of Quarry's own origin makes (as the console does)."""
    return driver.execute_async_script("""
        const [method, path, body, done] = arguments;
        fetch(path, {method, headers: {'Content-Type': 'application/json'},
                     body: body === null ? undefined : JSON.stringify(body)})
          .then(r => done(r.status), e => done(String(e)));""", method, path, body)


def _names(server) -> set[str]:
    answer = requests.get(server["url"] + "/api/projects", timeout=30,
                          headers={"Authorization": f"Bearer {server['token']}"})
    assert answer.status_code == 200
    return {p["name"] for p in answer.json()}


def _refusals(server, path: str) -> int:
    """403s the access log shows for POSTs to ``path``."""
    log = (server["tmp"] / "stdout.log").read_text()
    return sum(f'"POST {path} HTTP/1.1" 403' in line for line in log.splitlines())


def test_a_page_on_another_origin_changes_nothing(browser, console_server, elsewhere):
    url = console_server["url"]
    browser.get(url + "/console/static/LICENSES.txt")  # Quarry's origin, no console script
    assert _same_origin_fetch(browser, "POST", "/api/login",
                              {"username": USER, "password": PASSWORD}) == 200
    # Quarry's own pages change things with the cookie and no custom header.
    assert _same_origin_fetch(browser, "POST", "/api/projects", {"name": "xo_own"}) == 201
    assert _same_origin_fetch(browser, "DELETE", "/api/projects/xo_own") == 204
    cookie = browser.get_cookie("session")["value"]
    before = _names(console_server)
    refused_before = {p: _refusals(console_server, p)
                      for p in ("/api/projects", "/api/logout", "/api/sql/query")}

    browser.get(elsewhere + "/fetch.html")
    WebDriverWait(browser, 15).until(lambda d: d.title.startswith("done"))
    # The answers are not the page's to read (no CORS), but both requests were sent.
    assert browser.title == "done: failed TypeError, failed TypeError", browser.title
    for target in ("/sql/query", "/logout"):
        page = "form.html" if target == "/sql/query" else "logout.html"
        browser.get(f"{elsewhere}/{page}")
        WebDriverWait(browser, 15).until(lambda d: d.current_url.startswith(url))
        assert browser.current_url == url + "/api" + target
        assert "Cross-origin request refused" in browser.page_source
        assert "Sec-Fetch-Site: same-site" in browser.page_source

    # Quarry saw each request and refused it; nothing changed, the session still holds.
    assert _refusals(console_server, "/api/projects") == refused_before["/api/projects"] + 1
    assert _refusals(console_server, "/api/logout") == refused_before["/api/logout"] + 2
    assert _refusals(console_server, "/api/sql/query") == refused_before["/api/sql/query"] + 1
    assert _names(console_server) == before
    jar = requests.Session()
    jar.cookies.set("session", cookie)
    assert jar.get(url + "/api/projects", timeout=30).status_code == 200

    # The same bodies from a program holding the same cookie (no browser, no origin) work:
    # the pages failed for where they came from, not for what they sent.
    made = jar.post(url + "/api/projects", data=json.dumps(FETCH_PROJECT),
                    headers={"Content-Type": "text/plain"}, timeout=30)
    assert made.status_code == 201, made.text
    statement = json.dumps({"query": FORM_STATEMENT, "pad": ""})[:-2] + '="}\r\n'
    ran = jar.post(url + "/api/sql/query", data=statement,
                   headers={"Content-Type": "text/plain"}, timeout=30)
    assert ran.status_code == 200 and ran.json()["type"] == "ok", ran.text
    assert _names(console_server) == before | {"xo_by_fetch", "xo_by_form"}
    for name in ("xo_by_fetch", "xo_by_form"):
        assert jar.delete(f"{url}/api/projects/{name}", timeout=30).status_code == 204
    assert jar.post(url + "/api/logout", timeout=30).status_code == 200
    assert jar.get(url + "/api/projects", timeout=30).status_code == 401
