"""Sign-in abuse: failures are counted per user name and per client address, in the store."""

from __future__ import annotations

import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import assert_problem

from .conftest import add_user, sign_in


def _fail(client, name="alice", addr=None):
    headers = {"X-Forwarded-For": addr} if addr else {}
    return sign_in(client, name, "wrong password", headers=headers)


def test_a_user_is_refused_after_too_many_failures_even_with_the_right_password(
        make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=3, LOGIN_WINDOW_S=300)
    add_user(app)
    client = app.test_client()
    for _ in range(3):
        assert_problem(_fail(client), 401)
    refused = sign_in(client)
    body = assert_problem(refused, 429, "too many")
    assert 1 <= body["retry_after"] <= 301
    assert refused.headers["Retry-After"] == str(body["retry_after"])
    assert_problem(_fail(client), 429)


def test_the_user_limit_holds_across_client_addresses(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=3, PROXY_HOPS=1)
    add_user(app)
    client = app.test_client()
    for i in range(3):
        assert_problem(_fail(client, addr=f"198.51.100.{i}"), 401)
    assert_problem(sign_in(client, headers={"X-Forwarded-For": "198.51.100.77"}), 429)
    # Another user from one of those addresses is not affected (that address failed once).
    add_user(app, "bob")
    response = sign_in(client, "bob", headers={"X-Forwarded-For": "198.51.100.0"})
    assert response.status_code == 200


def test_an_address_is_refused_after_failures_on_many_user_names(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=3, PROXY_HOPS=1)
    add_user(app)
    client = app.test_client()
    for name in ("u1", "u2", "u3"):
        assert_problem(_fail(client, name, addr="192.0.2.10"), 401)
    assert_problem(sign_in(client, headers={"X-Forwarded-For": "192.0.2.10"}), 429)
    # The same user from another address signs in: the limit was on the address.
    assert sign_in(client, headers={"X-Forwarded-For": "192.0.2.11"}).status_code == 200


def test_forwarded_for_is_ignored_without_a_trusted_proxy(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=3, PROXY_HOPS=0)
    add_user(app)
    client = app.test_client()
    # A direct client cannot dodge the address limit by inventing addresses.
    for i, name in enumerate(("u1", "u2", "u3")):
        assert_problem(_fail(client, name, addr=f"10.0.0.{i}"), 401)
    assert_problem(sign_in(client, headers={"X-Forwarded-For": "10.9.9.9"}), 429)


def test_unknown_users_are_limited_exactly_like_real_ones(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=2, PROXY_HOPS=1)
    add_user(app)
    client = app.test_client()
    answers = {}
    for offset, name in ((10, "alice"), (20, "nobody")):
        # A fresh address each time, so only the per-user count can refuse.
        answers[name] = [_fail(client, name, addr=f"203.0.113.{offset + i}").status_code
                         for i in range(3)]
    assert answers["alice"] == answers["nobody"] == [401, 401, 429]


def test_a_successful_sign_in_clears_the_user_count_not_the_address_count(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=3, PROXY_HOPS=1)
    add_user(app)
    client = app.test_client()
    _fail(client, addr="198.51.100.1")
    _fail(client, addr="198.51.100.2")
    assert sign_in(client, headers={"X-Forwarded-For": "198.51.100.3"}).status_code == 200
    _fail(client, addr="198.51.100.4")
    _fail(client, addr="198.51.100.5")
    assert sign_in(client, headers={"X-Forwarded-For": "198.51.100.6"}).status_code == 200
    # An address keeps its count: one valid account must not reset an attacker's address.
    _fail(client, "someone", addr="198.51.100.7")
    _fail(client, "someone-else", addr="198.51.100.7")
    assert sign_in(client, headers={"X-Forwarded-For": "198.51.100.7"}).status_code == 200
    _fail(client, "third", addr="198.51.100.7")
    assert_problem(sign_in(client, headers={"X-Forwarded-For": "198.51.100.7"}), 429)


def test_a_parallel_burst_of_wrong_passwords_gets_no_more_guesses_than_the_limit(
        make_auth_app):
    # Checking the count before recording the failure let every request of a burst through
    # (2 gunicorn workers x 8 threads: 16 password guesses against a limit of 5).
    app = make_auth_app(LOGIN_MAX_FAILURES=3, PROXY_HOPS=1)
    add_user(app)
    racers = 12
    barrier = threading.Barrier(racers)

    def guess(i):
        client = app.test_client()
        barrier.wait()
        return _fail(client, addr=f"203.0.113.{i}").status_code

    with ThreadPoolExecutor(racers) as pool:
        statuses = list(pool.map(guess, range(racers)))
    assert statuses.count(401) <= 3 and statuses.count(401) + statuses.count(429) == racers
    # Refused attempts are not failures: one by one, the guesses left are exactly the rest.
    client = app.test_client()
    for i in range(3 - statuses.count(401)):
        assert_problem(_fail(client, addr=f"198.51.100.{i}"), 401)
    assert_problem(sign_in(client, headers={"X-Forwarded-For": "198.51.100.99"}), 429)


def test_failures_expire_with_the_window(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=1, LOGIN_WINDOW_S=1)
    add_user(app)
    client = app.test_client()
    _fail(client)
    assert_problem(sign_in(client), 429)
    time.sleep(1.2)
    assert sign_in(client).status_code == 200


def test_counts_are_shared_between_workers(make_auth_app):
    # Two apps on one store stand for two gunicorn workers (separate memory, same store).
    first = make_auth_app(LOGIN_MAX_FAILURES=2)
    second = make_auth_app(LOGIN_MAX_FAILURES=2)
    add_user(first)
    _fail(first.test_client())
    _fail(second.test_client())
    assert_problem(sign_in(first.test_client()), 429)
    assert_problem(sign_in(second.test_client()), 429)


@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_unknown_user_costs_as_much_time_as_a_wrong_password(make_auth_app):
    app = make_auth_app(LOGIN_MAX_FAILURES=1000)
    add_user(app)
    client = app.test_client()
    _fail(client, "nobody")  # warm-up: the dummy hash is made once per app

    def timed(name):
        start = time.perf_counter()
        assert _fail(client, name).status_code == 401
        return time.perf_counter() - start

    known = statistics.median(timed("alice") for _ in range(5))
    unknown = statistics.median(timed("nobody") for _ in range(5))
    # Both are one scrypt check (~0.1 s); skipping it for unknown users would be ~100x faster.
    assert 0.5 < unknown / known < 2.0, (known, unknown)
