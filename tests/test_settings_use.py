"""Settings read outside the app: gunicorn.conf.py takes its values and defaults from the
settings table (app/config.py), and the one LRU map the app uses."""

from __future__ import annotations

import runpy
import threading

import pytest

from app.config import SETTINGS
from app.lru import LruCache
from tests.live import ROOT

DEFAULTS = {s.name: s.default for s in SETTINGS}


def _gunicorn_conf(monkeypatch, **env: str) -> dict:
    for setting in SETTINGS:
        monkeypatch.delenv(f"QUARRY_{setting.name}", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    return runpy.run_path(str(ROOT / "gunicorn.conf.py"))


def test_gunicorn_defaults_are_the_settings_defaults(monkeypatch):
    conf = _gunicorn_conf(monkeypatch)
    assert conf["bind"] == [DEFAULTS["BIND"]]
    assert conf["threads"] == DEFAULTS["THREADS"]
    assert conf["timeout"] == int(DEFAULTS["SQL_TIMEOUT_S"]) + 30
    assert conf["loglevel"] == DEFAULTS["LOG_LEVEL"].lower()
    assert conf["workers"] >= 2  # CPU count + 1 when QUARRY_WORKERS is not set


def test_gunicorn_reads_the_environment_as_the_app_does(monkeypatch):
    conf = _gunicorn_conf(monkeypatch, QUARRY_BIND="0.0.0.0:9000", QUARRY_WORKERS="3",
                          QUARRY_THREADS="2", QUARRY_SQL_TIMEOUT_S="4.5",
                          QUARRY_LOG_LEVEL="DEBUG")
    assert (conf["bind"], conf["workers"], conf["threads"], conf["timeout"],
            conf["loglevel"]) == (["0.0.0.0:9000"], 3, 2, 34, "debug")
    with pytest.raises(RuntimeError, match="QUARRY_THREADS"):
        _gunicorn_conf(monkeypatch, QUARRY_THREADS="many")


def test_lru_keeps_the_most_recently_used():
    cache: LruCache[str, int] = LruCache(2)
    cache.put("a", 1)
    cache.put("b", 2)
    assert cache.get("a") == 1       # a is now the most recent
    cache.put("c", 3)                # so b goes
    assert (cache.get("a"), cache.get("b"), cache.get("c")) == (1, None, 3)
    assert cache.pop("a") == 1 and cache.get("a") is None and len(cache) == 1


def test_lru_stays_bounded_under_threads():
    cache: LruCache[int, int] = LruCache(50)

    def hammer(offset: int) -> None:
        for i in range(2000):
            cache.put(offset + i % 120, i)
            cache.get(offset + (i * 7) % 120)

    threads = [threading.Thread(target=hammer, args=(n * 1000,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(cache) == 50
