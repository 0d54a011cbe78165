"""docs/API.md stays true: every example in it is run against a live Quarry, in order.

The page's examples are pairs of ```http blocks: a request (``METHOD /path``, headers, a blank
line, the body) and the answer that follows it (``HTTP/1.1 <status>``, the headers that
matter, a blank line, the JSON body). They run in document order on a fresh store, so one
example may use what an earlier one created. An ``<!-- examples: sign-in required -->``
comment sends the examples after it to a second server with sign-in on and a user ``alice``
(``<!-- examples: open -->`` switches back). The placeholders an answer may use are the ones
the page explains; everything else must match the real answer exactly. An answer whose
Content-Type is ``text/plain`` (Prometheus' /metrics) is text: each of its lines but ``…``
must be a line of the real answer.

A second test walks the app's URL map and fails for any route the page has no example of.
"""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pytest
import requests
from werkzeug.exceptions import MethodNotAllowed, NotFound

from app import create_app
from app.config import load_settings
from app.extensions import db
from tests.live import ROOT, quarry_env, serving

API_MD = ROOT / "docs" / "API.md"
# The sign-in section's users (docs/API.md says an operator created them from the command
# line): alice and bob are members, root an admin.
USER, PASSWORD = "alice", "correct horse battery staple"
USERS = (("alice", []), ("bob", []), ("root", ["--admin"]))
# Flask adds a route for files under /static; Quarry ships no such files and documents none.
# The console's page (/ and /console) and its assets are HTML, script and styles, not API
# answers; tests/console/ covers them (docs/API.md says so under "The console").
NOT_QUARRY_ROUTES = {"static", "console.show_console", "console.console_asset"}

OPEN, SIGNED_IN = "open", "sign-in required"
_BLOCK = re.compile(r"^```http[ \t]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_SERVER = re.compile(r"<!--\s*examples:\s*(open|sign-in required)\s*-->")
_REQUEST_LINE = re.compile(r"(GET|POST|PUT|PATCH|DELETE) (/\S*)( HTTP/1\.1)?")
_STATUS_LINE = re.compile(r"HTTP/1\.1 (\d{3})( .*)?")

ELLIPSIS = "…"  # in an object: `"…": "…"` allows more members; last in an array: more items
# Placeholders for values that change from run to run (ids are stable: they are literal).
_PLACEHOLDERS = {
    "<any>": lambda v: True,
    "<string>": lambda v: isinstance(v, str),
    "<number>": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "<timestamp>": lambda v: isinstance(v, str) and _is_timestamp(v),
}


def _is_timestamp(text: str) -> bool:
    try:
        return datetime.fromisoformat(text).tzinfo is not None
    except ValueError:
        return False


@dataclass
class Example:
    line: int  # of the request block in docs/API.md, for the failure report
    server: str
    method: str
    path: str
    headers: dict[str, str]
    body: str
    status: int
    answer_headers: dict[str, str]
    answer: str  # the expected body's text (JSON), or "" for none
    failures: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"docs/API.md:{self.line} {self.method} {self.path}"


def _head_and_body(text: str) -> tuple[list[str], str]:
    head, _, body = text.partition("\n\n")
    return head.strip().splitlines(), body.strip()


def _headers(lines: list[str], where: str) -> dict[str, str]:
    headers = {}
    for line in lines:
        name, colon, value = line.partition(":")
        assert colon and name.strip(), f"{where}: not a header line: {line!r}"
        headers[name.strip()] = value.strip()
    return headers


def parse_examples(text: str) -> list[Example]:
    """The request/answer pairs of the page, in order; a request without an answer fails."""
    markers = [(m.start(), m.group(1)) for m in _SERVER.finditer(text)]
    blocks = list(_BLOCK.finditer(text))
    examples = []
    i = 0
    while i < len(blocks):
        line = text.count("\n", 0, blocks[i].start()) + 2
        head, body = _head_and_body(blocks[i].group(1))
        request = _REQUEST_LINE.fullmatch(head[0]) if head else None
        assert request, f"docs/API.md:{line}: an http block must start with 'METHOD /path'"
        assert i + 1 < len(blocks), f"docs/API.md:{line}: a request without its answer"
        answer_head, answer = _head_and_body(blocks[i + 1].group(1))
        status = _STATUS_LINE.fullmatch(answer_head[0]) if answer_head else None
        assert status, f"docs/API.md:{line}: the block after a request must be its answer, " \
                       "starting with 'HTTP/1.1 <status>'"
        server = OPEN
        for position, name in markers:
            if position < blocks[i].start():
                server = name
        examples.append(Example(line, server, request.group(1), request.group(2),
                                _headers(head[1:], f"docs/API.md:{line}"), body,
                                int(status.group(1)),
                                _headers(answer_head[1:], f"docs/API.md:{line + 1}"), answer))
        i += 2
    return examples


# ------------------------------------------------------------------------------ matching


def mismatches(expected: Any, actual: Any, where: str = "body") -> Iterator[str]:
    """Where ``actual`` differs from the documented ``expected`` (placeholders allowed)."""
    if isinstance(expected, str) and expected in _PLACEHOLDERS:
        if not _PLACEHOLDERS[expected](actual):
            yield f"{where}: {actual!r} is not {expected}"
    elif isinstance(expected, dict):
        if not isinstance(actual, dict):
            yield f"{where}: expected an object, got {actual!r}"
            return
        open_ended = expected.get(ELLIPSIS) == ELLIPSIS
        keys = [k for k in expected if not (open_ended and k == ELLIPSIS)]
        for key in keys:
            if key not in actual:
                yield f"{where}: member {key!r} is missing"
            else:
                yield from mismatches(expected[key], actual[key], f"{where}.{key}")
        extra = [k for k in actual if k not in expected]
        if extra and not open_ended:
            yield f"{where}: undocumented members {extra}"
    elif isinstance(expected, list):
        if not isinstance(actual, list):
            yield f"{where}: expected an array, got {actual!r}"
            return
        open_ended = bool(expected) and expected[-1] == ELLIPSIS
        items = expected[:-1] if open_ended else expected
        if len(actual) < len(items) or (not open_ended and len(actual) != len(items)):
            yield f"{where}: {len(actual)} items, the page shows {len(items)}"
        for n, (want, got) in enumerate(zip(items, actual, strict=False)):
            yield from mismatches(want, got, f"{where}[{n}]")
    elif isinstance(expected, str) and "<any>" in expected:
        pattern = ".*".join(re.escape(part) for part in expected.split("<any>"))
        if not (isinstance(actual, str) and re.fullmatch(pattern, actual, re.DOTALL)):
            yield f"{where}: {actual!r} does not read {expected!r}"
    elif type(expected) is not type(actual) and not (
            isinstance(expected, int | float) and isinstance(actual, int | float)
            and not isinstance(actual, bool) and not isinstance(expected, bool)):
        yield f"{where}: {actual!r}, the page shows {expected!r}"
    elif expected != actual:
        yield f"{where}: {actual!r}, the page shows {expected!r}"


def _is_text(example: Example) -> bool:
    return example.answer_headers.get("Content-Type", "").startswith("text/plain")


def check(example: Example, response: requests.Response) -> list[str]:
    failures = []
    if response.status_code != example.status:
        failures.append(f"status {response.status_code}, the page shows {example.status}")
    for name, want in example.answer_headers.items():
        got = response.headers.get(name)
        if got is None:
            failures.append(f"header {name} is missing")
        else:
            failures.extend(mismatches(want, got, f"header {name}"))
    if _is_text(example):
        lines = set(response.text.splitlines())
        failures += [f"line {want!r} is not in the answer" for want in
                     example.answer.splitlines() if want not in (ELLIPSIS, "") and
                     want not in lines]
        return failures
    if not example.answer:
        if response.content:
            failures.append(f"body {response.text[:200]!r}, the page shows none")
        return failures
    try:
        actual = response.json()
    except ValueError:
        return [*failures, f"body is not JSON: {response.text[:200]!r}"]
    failures.extend(mismatches(json.loads(example.answer), actual))
    if failures:
        failures.append("real answer: " + json.dumps(actual, ensure_ascii=False)[:3000])
    return failures


# ------------------------------------------------------------------------------ the tests


def test_the_page_parses_and_its_answers_are_json():
    examples = parse_examples(API_MD.read_text())
    assert {example.server for example in examples} == {OPEN, SIGNED_IN}
    for example in examples:
        # A multipart body (an upload, PUT /api/files) is a form, not JSON.
        form = example.headers.get("Content-Type", "").startswith("multipart/")
        for text in ("" if form else example.body, "" if _is_text(example) else example.answer):
            if text:
                json.loads(text)  # a typo in an example is a failure here, not a mismatch later


def test_every_route_has_an_example(tmp_path):
    app = create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/store.db",
                      "INSTANCE_PATH": str(tmp_path), "DEMO_SOURCE": False, "TESTING": True})
    adapter = app.url_map.bind("localhost")
    covered, unrouted = set(), []
    for example in parse_examples(API_MD.read_text()):
        try:
            endpoint, _ = adapter.match(example.path.partition("?")[0], method=example.method)
        except (NotFound, MethodNotAllowed):
            unrouted.append(str(example))
            continue
        covered.add((endpoint, example.method))
    routes = {(rule.endpoint, method) for rule in app.url_map.iter_rules()
              if rule.endpoint not in NOT_QUARRY_ROUTES
              for method in rule.methods - {"HEAD", "OPTIONS"}}
    with app.app_context():
        db.engine.dispose()
    assert not unrouted, f"examples that reach no route: {unrouted}"
    missing = sorted(routes - covered)
    assert not missing, f"routes without an example in docs/API.md: {missing}"


@pytest.fixture(scope="module")
def servers(tmp_path_factory, sqlite_template, demo_db) -> Iterator[dict[str, str]]:
    """Two gunicorns on fresh stores: the default settings, and sign-in required."""
    tmp = tmp_path_factory.mktemp("api-docs")
    for store in ("open.db", "auth.db"):  # copies of the store the migrations built
        shutil.copy(sqlite_template, tmp / store)
    # The open server's demo file in its instance folder (a page's example connects to it by
    # that name): a copy of the session's, not one built at start (seconds of CPU).
    (tmp / "open").mkdir()
    shutil.copy(demo_db, tmp / "open" / "demo.db")
    settings = {"QUARRY_WORKERS": "1", "QUARRY_THREADS": "4"}
    open_env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/open.db",
                          QUARRY_INSTANCE_PATH=str(tmp / "open"), **settings)
    auth_env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/auth.db",
                          QUARRY_INSTANCE_PATH=str(tmp / "auth"), QUARRY_DEMO_SOURCE="false",
                          QUARRY_AUTH_REQUIRED="true", QUARRY_SECRET_KEY="docs-" + "k" * 40,
                          **settings)
    _create_user(auth_env)
    # Started side by side: each takes seconds to load the app.
    with ExitStack() as stack:
        with ThreadPoolExecutor(2) as pool:
            started = pool.map(lambda args: stack.enter_context(serving(*args)).url,
                               [(open_env, tmp / "open"), (auth_env, tmp / "auth")])
            plain, guarded = list(started)
        yield {OPEN: plain, SIGNED_IN: guarded}


def _create_user(env: dict[str, str]) -> None:
    # What an operator runs (`flask --app wsgi users create alice`), in this process.
    app = create_app(load_settings(env))
    for name, options in USERS:
        result = app.test_cli_runner().invoke(args=["users", "create", name, *options],
                                              input=PASSWORD + "\n")
        assert result.exit_code == 0, result.output
    with app.app_context():
        db.engine.dispose()


@pytest.mark.slow
def test_every_example_answers_as_the_page_shows(servers):
    # One cookie jar per server, as a browser (or curl -b/-c) keeps the session cookie.
    clients = {name: requests.Session() for name in servers}
    failed = []
    for example in parse_examples(API_MD.read_text()):
        response = clients[example.server].request(
            example.method, servers[example.server] + example.path, headers=example.headers,
            data=example.body.encode() if example.body else None, timeout=60)
        failures = check(example, response)
        if failures:
            failed.append(f"{example}:\n    " + "\n    ".join(failures))
    assert not failed, "\n".join(failed)
