"""Changes that a page on another origin starts are refused, by Fetch Metadata or Origin.

Through Flask's test client (its own origin is http://localhost), with the headers a browser
would send. A program sends neither header, and signs its changes with the session cookie
as well as with a token. tests/console/test_cross_origin.py does the same with a real
Chromium; tests/auth/test_gunicorn.py with a cookie jar against gunicorn.
"""

from __future__ import annotations

import pytest

from tests.conftest import fresh_store_url
from tests.helpers import assert_problem, skill_body

from .conftest import add_user, sign_in

OWN = "http://localhost"


@pytest.fixture(params=["sqlite"])
def store_url(request, tmp_path) -> str:
    # The check runs before any view touches the store: one kind keeps the suite short.
    return fresh_store_url(request, tmp_path)


def _projects(client) -> list[str]:
    answer = client.get("/api/projects")
    assert answer.status_code == 200
    return sorted(p["name"] for p in answer.get_json())


def _refused(answer, mentions: str) -> None:
    problem = assert_problem(answer, 403)
    assert problem["title"] == "Cross-origin request refused"
    assert mentions in problem["detail"], problem


@pytest.fixture
def browser(auth_app, alice):
    """A test client holding alice's session cookie, as a browser after sign-in."""
    client = auth_app.test_client()
    assert sign_in(client).status_code == 200
    return client


def test_the_browser_says_where_a_change_comes_from(browser):
    before = _projects(browser)
    for site in ("cross-site", "same-site", "Cross-Site", "something-new"):
        headers = {"Sec-Fetch-Site": site}
        _refused(browser.post("/api/projects", json={"name": "by_page"}, headers=headers),
                 f"Sec-Fetch-Site: {site}")
        # The old custom header opens nothing, and the origin header cannot outvote the
        # browser's own word.
        _refused(browser.post("/api/projects", json={"name": "by_page"},
                              headers={**headers, "X-Quarry-CSRF": "1", "Origin": OWN}),
                 "Sec-Fetch-Site")
        _refused(browser.post("/api/logout", headers=headers), "Sec-Fetch-Site")
    assert _projects(browser) == before  # nothing was made, and the session still holds
    for n, site in enumerate(("same-origin", "none")):
        made = browser.post("/api/projects", json={"name": f"mine_{n}"},
                            headers={"Sec-Fetch-Site": site})
        assert made.status_code == 201, made.get_json()
    # Reads are not changes: a page elsewhere may make the browser read (it cannot see the
    # answer; the same-origin policy keeps it).
    assert browser.get("/api/projects", headers={"Sec-Fetch-Site": "cross-site"}
                       ).status_code == 200
    assert _projects(browser) == sorted([*before, "mine_0", "mine_1"])


def test_without_fetch_metadata_the_origin_must_be_quarrys_own(browser):
    before = _projects(browser)
    browser.post("/api/sql/query", json={"query": "SELECT 1"})  # a line of history
    for origin in ("http://evil.example", "http://localhost:8080", "https://localhost",
                   "null", "http://localhost/console", "not an origin"):
        headers = {"Origin": origin}
        _refused(browser.post("/api/projects", json={"name": "by_page"}, headers=headers),
                 f"Origin: {origin}")
        _refused(browser.delete("/api/console/history", headers=headers), "Origin")
        _refused(browser.post("/api/logout", headers=headers), "Origin")
    assert _projects(browser) == before
    assert len(browser.get("/api/console/history").get_json()) == 1
    for n, origin in enumerate((OWN, "HTTP://LocalHost:80")):
        made = browser.post("/api/projects", json={"name": f"mine_{n}"},
                            headers={"Origin": origin})
        assert made.status_code == 201, made.get_json()
    assert browser.delete("/api/console/history", headers={"Origin": OWN}).status_code == 204
    assert browser.get("/api/console/history").get_json() == []


def test_a_program_changes_everything_with_the_cookie_alone(browser):
    # No Sec-Fetch-Site, no Origin: not a browser, so no page started it.
    assert browser.post("/api/projects", json={"name": "by_program"}).status_code == 201
    assert browser.post("/api/projects/by_program/skills", json=skill_body("s1")
                        ).status_code == 201
    assert browser.delete("/api/projects/by_program/skills/s1").status_code == 204
    assert browser.delete("/api/projects/by_program").status_code == 204
    cookie = browser.get_cookie("session").value
    assert browser.post("/api/logout").status_code == 200
    browser.set_cookie("session", cookie)  # the same cookie, kept by a careless program
    assert_problem(browser.get("/api/projects"), 401)
    assert_problem(browser.post("/api/projects", json={"name": "after"}), 401)


def test_every_caller_is_checked_and_with_sign_in_off_too(auth_app, alice, make_app):
    token = sign_in(auth_app.test_client()).get_json()["token"]
    bearer = auth_app.test_client()
    headers = {"Authorization": f"Bearer {token}", "Sec-Fetch-Site": "cross-site"}
    _refused(bearer.post("/api/projects", json={"name": "by_page"}, headers=headers),
             "Sec-Fetch-Site")
    # An open Quarry on the user's machine is no less worth protecting from a page.
    open_quarry = make_app(DEMO_SOURCE=False).test_client()
    _refused(open_quarry.post("/api/projects", json={"name": "by_page"},
                              headers={"Origin": "http://evil.example"}), "Origin")
    _refused(open_quarry.put("/api/projects/mindsdb/skills/s", json=skill_body("s"),
                             headers={"Sec-Fetch-Site": "same-site"}), "Sec-Fetch-Site")
    assert _projects(open_quarry) == ["mindsdb"]
    assert open_quarry.post("/api/projects", json={"name": "mine"},
                            headers={"Origin": OWN}).status_code == 201


def test_behind_the_proxy_the_origin_is_the_one_the_proxy_reports(make_auth_app):
    forwarded = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "quarry.example.com",
                 "X-Forwarded-For": "192.0.2.7"}
    behind = make_auth_app(PROXY_HOPS=1)
    add_user(behind)
    client = behind.test_client()
    assert sign_in(client, headers=forwarded).status_code == 200
    cases = [({}, "https://quarry.example.com", 201),
             ({}, "https://quarry.example.com:443", 201),
             ({}, "http://quarry.example.com", 403),     # the proxy said https
             ({}, OWN, 403),                             # the address behind the proxy
             ({"X-Forwarded-Port": "8443"}, "https://quarry.example.com:8443", 201),
             ({"X-Forwarded-Port": "8443"}, "https://quarry.example.com", 403)]
    for n, (more, origin, status) in enumerate(cases):
        answer = client.post("/api/projects", json={"name": f"p{n}"},
                             headers={**forwarded, **more, "Origin": origin})
        assert answer.status_code == status, (more, origin, answer.get_json())
    assert _projects(client) == ["p0", "p1", "p4"]  # alice sees what she owns


def test_without_a_proxy_forwarded_headers_are_not_believed(browser):
    forged = {"X-Forwarded-Proto": "https", "X-Forwarded-Host": "quarry.example.com",
              "Origin": "https://quarry.example.com"}
    _refused(browser.post("/api/projects", json={"name": "by_page"}, headers=forged),
             "Quarry is http://localhost")
    assert "by_page" not in _projects(browser)


def test_trusted_origins_may_make_changes(make_auth_app):
    app = make_auth_app(TRUSTED_ORIGINS=" https://Dash.example.com/ ,http://localhost:3000")
    add_user(app)
    client = app.test_client()
    sign_in(client)
    allowed = [{"Origin": "https://dash.example.com", "Sec-Fetch-Site": "cross-site"},
               {"Origin": "https://dash.example.com:443"},
               {"Origin": "http://localhost:3000", "Sec-Fetch-Site": "same-site"}]
    for n, headers in enumerate(allowed):
        answer = client.post("/api/projects", json={"name": f"t{n}"}, headers=headers)
        assert answer.status_code == 201, (headers, answer.get_json())
    for headers in ({"Origin": "https://dash.example.com.evil.example",
                     "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "http://dash.example.com", "Sec-Fetch-Site": "cross-site"},
                    {"Origin": "http://localhost:3001"},
                    {"Sec-Fetch-Site": "cross-site"}):
        _refused(client.post("/api/projects", json={"name": "by_page"}, headers=headers),
                 "QUARRY_TRUSTED_ORIGINS")
    assert _projects(client) == ["t0", "t1", "t2"]


@pytest.mark.parametrize("value", ["dash.example.com", "https://dash.example.com/app",
                                   "ftp://dash.example.com", "https://dash.example.com:99999",
                                   "https://user@dash.example.com"])
def test_a_malformed_trusted_origin_stops_the_start(make_auth_app, value):
    with pytest.raises(RuntimeError, match="QUARRY_TRUSTED_ORIGINS") as error:
        make_auth_app(TRUSTED_ORIGINS=f"https://ok.example.com,{value}")
    assert repr(value) in str(error.value)
