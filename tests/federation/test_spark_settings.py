"""FEDERATION_ENGINE and SPARK_REMOTE are checked when the app is built: a deployment that
asks for Spark without saying where it is, or names no engine Quarry has, does not start."""

from __future__ import annotations

import pytest

from app import create_app

from ..conftest import _dispose


@pytest.mark.parametrize(("settings", "words"), [
    ({"FEDERATION_ENGINE": "presto"}, "duckdb, spark, auto"),
    ({"FEDERATION_ENGINE": "spark"}, "QUARRY_SPARK_REMOTE"),
    ({"FEDERATION_ENGINE": "auto", "SPARK_REMOTE": "http://spark:15002"}, "sc://host:port"),
    ({"SPARK_MAX_PARTITIONS": 0}, "QUARRY_SPARK_MAX_PARTITIONS must be at least 1"),
    ({"SPARK_PARTITION_ROWS": -1}, "QUARRY_SPARK_PARTITION_ROWS at least 0"),
])
def test_a_bad_engine_setting_stops_the_start(tmp_path, settings, words):
    with pytest.raises(RuntimeError, match=words.replace("(", r"\(")):
        create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/s.db",
                    "INSTANCE_PATH": str(tmp_path), "TESTING": True, "DEMO_SOURCE": False,
                    **settings})


def test_spark_settings_are_accepted(tmp_path):
    app = create_app({"DATABASE_URL": f"sqlite:///{tmp_path}/s.db",
                      "INSTANCE_PATH": str(tmp_path), "TESTING": True, "DEMO_SOURCE": False,
                      "FEDERATION_ENGINE": "auto", "SPARK_REMOTE": "sc://127.0.0.1:15002"})
    try:
        assert app.config["SPARK_MIN_ROWS"] == 5_000_000
    finally:
        _dispose(app)
