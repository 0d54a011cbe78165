"""Forecasting models (ORDER BY … GROUP BY … WINDOW … HORIZON …) on real PostgreSQL and
SQLite sources holding generated seasonal series: training, describe, LATEST predictions,
REST forecasts from history, and the errors of bad time-series input."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import math
import os
import shutil
import sqlite3
from collections.abc import Iterator

import psycopg
import pytest
from flask import Flask

from app import create_app
from tests.conftest import PG_ADMIN_URL, _dispose
from tests.helpers import assert_problem

PG_DB = f"quarry_ts_{os.getpid()}"
START = dt.date(2024, 1, 1)
DAYS = 84
STORES = ("north", "south", "east")


def _sales(store: int, day: int) -> float:
    # A weekly season, a slow trend and a deterministic wobble: the seasonal naive forecast
    # is good, the naive one is not.
    return round(100 + 20 * store + 15 * math.sin(2 * math.pi * day / 7) + 0.2 * day
                 + 2 * math.sin(day * 1.7 + store), 3)


def _promo(store: int, day: int) -> bool:
    return day % 7 == (3 + 2 * store) % 7 or day % 11 == store


def _promoted(store: int, day: int) -> float:
    return round(100 + 10 * store + 0.1 * day + (40 if day and _promo(store, day - 1) else 0)
                 + 3 * math.sin(day * 1.3 + store), 3)


def _pg(database: str) -> psycopg.Connection:
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    return psycopg.connect(url.rsplit("/", 1)[0] + "/" + database, autocommit=True)


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    with _pg("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')
        admin.execute(f'CREATE DATABASE "{PG_DB}"')
    with _pg(PG_DB) as conn:
        # numeric: the driver answers Decimal values, which training reads as numbers.
        conn.execute("CREATE TABLE sales (store text, day date, amount numeric(12, 3), "
                     "promo integer)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO sales VALUES (%s, %s, %s, %s)", [
                (name, START + dt.timedelta(days=d), _sales(i, d), int(d % 5 == 0))
                for i, name in enumerate(STORES) for d in range(DAYS)
                if not (name == "east" and d == 40)])  # one gap, filled by interpolation
        conn.execute("CREATE TABLE later (store text, day date, amount float8)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO later VALUES (%s, %s, %s)", [
                (name, START + dt.timedelta(days=d), _sales(i, d))
                for i, name in enumerate(STORES) for d in range(DAYS, DAYS + 7)])
        # The day after a promotion sells 40 more: only a model that reads the promo column
        # (an exogenous input) can tell. Promotions on days 3, 10, 17, … and 5, 12, …
        conn.execute("CREATE TABLE promos (store text, day date, amount float8, promo "
                     "integer, region text)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO promos VALUES (%s, %s, %s, %s, %s)", [
                (name, START + dt.timedelta(days=d), _promoted(i, d), int(_promo(i, d)),
                 "coast" if i % 2 else "inland")
                for i, name in enumerate(STORES) for d in range(DAYS)])
        conn.execute("CREATE TABLE twice (store text, day date, amount float8)")
        conn.execute("INSERT INTO twice SELECT store, day, amount FROM sales "
                     "UNION ALL SELECT store, day, amount FROM sales WHERE day = '2024-02-01'")
    url = PG_ADMIN_URL.replace("postgresql+psycopg://", "postgresql://")
    yield url.rsplit("/", 1)[0] + "/" + PG_DB
    with _pg("postgres") as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{PG_DB}" WITH (FORCE)')


@pytest.fixture(scope="module")
def lite_url(tmp_path_factory) -> str:
    """One series on integer steps of 2 (step numbers 0, 2, 4, …), season of 12 steps."""
    path = tmp_path_factory.mktemp("ts") / "ts.db"
    with contextlib.closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE load (step INTEGER, value REAL)")
        conn.executemany("INSERT INTO load VALUES (?, ?)", [
            (2 * i, 50 + 10 * math.cos(2 * math.pi * i / 12) + (i % 3)) for i in range(96)])
        conn.commit()
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def ts_app(pg_url, lite_url, sqlite_template, session_dir) -> Iterator[Flask]:
    store = os.path.join(session_dir, f"ts-store-{os.getpid()}.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                      "TESTING": True, "DATA_SOURCES": {"pg": pg_url, "lite": lite_url}})
    yield app
    _dispose(app)


@pytest.fixture(scope="module")
def client(ts_app):
    client = ts_app.test_client()
    assert client.post("/api/projects", json={"name": "ts"}).status_code == 201
    return client


def _info(client, model: str) -> dict:
    """describe's info of a model of project ts."""
    info = client.get(f"/api/projects/ts/models/{model}/describe?attribute=info").get_json()
    return info[0] if isinstance(info, list) else info


def sql(client, query: str) -> dict:
    response = client.post("/api/sql/query", json={"query": query})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


@pytest.fixture(scope="module")
def sales_model(client) -> dict:
    """Trained once for the module (through SQL, as MindsDB's clients send it)."""
    answer = sql(client, "CREATE MODEL ts.sales FROM pg (SELECT store, day, amount FROM sales) "
                         "PREDICT amount ORDER BY day GROUP BY store WINDOW 14 HORIZON 7 "
                         "USING join_learn_process = true, time_budget_s = 20")
    assert answer["type"] == "table", answer
    record = client.get("/api/projects/ts/models/sales").get_json()
    assert record["status"] == "complete", record
    return record


def test_training_records_the_clauses_and_describe_tells_the_evaluation(client, sales_model):
    assert sales_model["training_options"]["timeseries"] == {
        "order": "day", "group": ["store"], "window": 14, "horizon": 7}
    info = _info(client, "sales")
    series = info["timeseries"]
    assert (series["order_kind"], series["frequency"]) == ("date", "daily")
    assert series["seasonal_period"] == 7 and series["gaps_filled"] == 1
    assert info["series"] == 3
    accuracies = info["accuracies"]
    snaive = accuracies["seasonal_naive"]
    tried = client.get("/api/projects/ts/models/sales/describe?attribute=model").get_json()
    by_name = {r["name"]: r for r in tried}
    assert info["model"] == next(r["name"] for r in tried if r["selected"])
    # The seasonal naive forecast beats the naive one by far on a weekly series, and the
    # chosen method is never worse than the seasonal naive (it is one of the candidates).
    assert snaive["mase"] < by_name["Naive"]["performance"] / 2
    assert by_name["SeasonalNaive"]["performance"] == snaive["mase"]
    assert accuracies["mase"] <= snaive["mase"]
    assert {"mase_std", "smape", "smape_std"} <= set(accuracies)
    if info["model"] == "Lag features --> HistGradientBoosting":
        shares = info["column_importances"]
        assert set(shares) == {"day", "amount"} and abs(sum(shares.values()) - 1) < 0.01
    else:  # the statistical methods have no importances
        assert info["column_importances"] is None
    assert accuracies["interval_level"] == 0.9
    assert 0 <= accuracies["interval_coverage"] <= 1


def test_latest_forecasts_the_next_horizon_rows_of_the_series_asked(client, sales_model):
    answer = sql(client, "SELECT m.store, m.day, m.amount, m.amount_lower, m.amount_upper "
                         "FROM pg.sales AS t JOIN ts.sales AS m "
                         "WHERE t.day > LATEST AND t.store = 'south'")
    assert answer["column_names"] == ["store", "day", "amount", "amount_lower",
                                      "amount_upper"]
    rows = answer["data"]
    assert len(rows) == 7
    last = START + dt.timedelta(days=DAYS - 1)
    assert [str(r[1])[:10] for r in rows] == [
        (last + dt.timedelta(days=i)).isoformat() for i in range(1, 8)]
    for step, (store, _, value, lower, upper) in enumerate(rows):
        assert store == "south" and lower <= value <= upper
        truth = _sales(1, DAYS + step)
        assert abs(value - truth) < 10, (step, value, truth)
    every = sql(client, "SELECT m.store, m.amount FROM pg.sales AS t JOIN ts.sales AS m "
                        "WHERE t.day > LATEST")["data"]
    assert sorted({r[0] for r in every}) == sorted(STORES) and len(every) == 21


def test_rest_predict_takes_history_and_answers_the_forecast(client, sales_model):
    history = [{"store": "west", "day": (START + dt.timedelta(days=d)).isoformat(),
                "amount": _sales(0, d)} for d in range(30)]
    response = client.post("/api/projects/ts/models/sales/predict", json={"data": history})
    assert response.status_code == 200, response.get_json()
    rows = response.get_json()
    assert len(rows) == 7 and {r["store"] for r in rows} == {"west"}
    first = rows[0]
    assert str(first["day"]).startswith("2024-01-31")
    assert first["amount_lower"] <= first["amount"] <= first["amount_upper"]
    explain = json.loads(first["amount_explain"])
    assert explain["confidence"] == 0.9 and explain["horizon_step"] == 1
    # A row naming a trained group without history: the forecast starts from training's tail.
    named = client.post("/api/projects/ts/models/sales/predict",
                        json={"data": [{"store": "north"}]}).get_json()
    assert len(named) == 7 and str(named[0]["day"]).startswith("2024-03-25")


def test_bad_history_is_a_clear_422(client, sales_model):
    short = [{"store": "west", "day": f"2024-01-{d:02d}", "amount": 1.0} for d in range(1, 6)]
    assert_problem(client.post("/api/projects/ts/models/sales/predict", json={"data": short}),
                   422, "WINDOW is 14")
    doubled = [{"store": "west", "day": f"2024-01-{d:02d}", "amount": 1.0}
               for d in range(1, 21)] + [{"store": "west", "day": "2024-01-05", "amount": 2}]
    assert_problem(client.post("/api/projects/ts/models/sales/predict",
                               json={"data": doubled}), 422, "twice")
    assert_problem(client.post("/api/projects/ts/models/sales/predict",
                               json={"data": [{"store": "nowhere"}]}), 422, "nowhere")
    # Through SQL: a group neither the training data nor the table holds.
    answer = client.post("/api/sql/query", json={
        "query": "SELECT m.amount FROM pg.sales AS t JOIN ts.sales AS m "
                 "WHERE t.day > LATEST AND t.store = 'nowhere'"}).get_json()
    assert answer["type"] == "error" and "store = 'nowhere'" in answer["error_message"]
    assert "neither in the training data" in answer["error_message"]
    # A trained group the table's rows leave out is forecast from its training rows.
    rows = sql(client, "SELECT m.store, m.day FROM pg.sales AS t JOIN ts.sales AS m "
                       "WHERE t.day > LATEST AND t.store = 'north' AND t.day < '2000-01-01'")
    assert len(rows["data"]) == 7 and rows["data"][0][0] == "north"


@pytest.fixture(scope="module")
def load_model(client) -> None:
    """One series on integer steps, trained once for the module."""
    answer = sql(client, "CREATE MODEL ts.load FROM lite (SELECT step, value FROM load) "
                         "PREDICT value ORDER BY step HORIZON 12 "
                         "USING join_learn_process = true, time_budget_s = 10")
    assert answer["type"] == "table", answer


def test_integer_steps_on_sqlite_without_groups(client, load_model):
    described = _info(client, "load")
    assert described["timeseries"]["order_kind"] == "integer"
    assert described["timeseries"]["frequency"] == "integer steps of 2"
    rows = sql(client, "SELECT m.step, m.value FROM lite.load AS t JOIN ts.load AS m "
                       "WHERE t.step > LATEST")["data"]
    assert [r[0] for r in rows] == list(range(192, 216, 2))
    for step, value in rows:
        truth = 50 + 10 * math.cos(2 * math.pi * (step // 2) / 12) + (step // 2) % 3
        assert abs(value - truth) < 5, (step, value, truth)


def test_duplicates_in_training_data_end_in_an_error_naming_them(client, pg_url):
    answer = client.post("/api/sql/query", json={
        "query": "CREATE MODEL ts.twice FROM pg (SELECT * FROM twice) PREDICT amount "
                 "ORDER BY day GROUP BY store HORIZON 3 USING join_learn_process = true"}
    ).get_json()
    assert answer["type"] == "error", answer
    record = client.get("/api/projects/ts/models/twice").get_json()
    assert record["status"] == "error"
    assert "2024-02-01" in record["error"] and "twice" in record["error"]


@pytest.mark.parametrize(("clauses", "words"), [
    ("GROUP BY store HORIZON 3", "needs ORDER BY"),
    ("ORDER BY day HORIZON 0", "HORIZON must be"),
    ("ORDER BY day WINDOW 100000 HORIZON 3", "WINDOW must be"),
    ("ORDER BY nope HORIZON 3", "'nope' (the ORDER BY column)"),
    ("ORDER BY day GROUP BY shop HORIZON 3", "'shop' (a GROUP BY column)"),
])
def test_time_series_clauses_that_cannot_train_are_422(client, clauses, words):
    response = client.post("/api/projects/ts/models", json={
        "query": f"CREATE MODEL ts.bad FROM pg (SELECT * FROM sales) PREDICT amount {clauses}"})
    assert_problem(response, 422, words)
    assert client.get("/api/projects/ts/models/bad").status_code == 404


def test_latest_on_a_tabular_model_says_why(client):
    sql(client, "CREATE MODEL ts.flat FROM lite (SELECT step, value FROM load) PREDICT value "
                "USING join_learn_process = true, time_budget_s = 2")
    answer = client.post("/api/sql/query", json={
        "query": "SELECT m.value FROM lite.load AS t JOIN ts.flat AS m WHERE t.step > LATEST"}
    ).get_json()
    assert answer["type"] == "error" and "no forecasting model" in answer["error_message"]


def test_retrain_keeps_forecasting(client, sales_model):
    response = client.post("/api/projects/ts/models/sales/retrain",
                           json={"using": {"join_learn_process": True, "time_budget_s": 5}})
    assert response.status_code in (200, 201, 202), response.get_json()
    record = client.get("/api/projects/ts/models/sales.2").get_json()
    assert record["status"] == "complete", record
    assert record["training_options"]["timeseries"]["horizon"] == 7
    rows = client.post("/api/projects/ts/models/sales.2/predict",
                       json={"data": [{"store": "east"}]}).get_json()
    assert len(rows) == 7


def test_finetune_extends_the_series_with_the_new_rows(client, sales_model):
    response = client.post("/api/projects/ts/models/sales/finetune", json={
        "query": "SELECT store, day, amount FROM later", "data_source": "pg",
        # Not activated: the other tests read the active version's series ends.
        "using": {"join_learn_process": True, "time_budget_s": 5, "active": False}})
    assert response.status_code in (200, 201, 202), response.get_json()
    version = response.get_json()["version"]
    record = client.get(f"/api/projects/ts/models/sales.{version}").get_json()
    assert record["status"] == "complete", record
    # A trained group asked without history starts after the new rows, not the old ones.
    rows = client.post(f"/api/projects/ts/models/sales.{version}/predict",
                       json={"data": [{"store": "north"}]}).get_json()
    assert str(rows[0]["day"]).startswith((START + dt.timedelta(days=DAYS + 7)).isoformat())


@pytest.mark.parametrize(("history", "words"), [
    ([{"store": "west", "day": "not a day", "amount": 1.0}] * 20, "ORDER BY column 'day'"),
    ([{"store": "west", "day": d, "amount": 1.0} for d in range(20)], "holds integer steps"),
    ([{"store": "west", "day": f"2024-01-01 {d:02d}:00", "amount": 1.0} for d in range(20)],
     "off the series' regular steps"),
    ([{"store": "west", "day": f"2024-01-{d:02d}", "amount": "many"} for d in range(1, 21)],
     "'amount' holds 'many'"),
    ([{"store": ["x"], "day": f"2024-01-{d:02d}", "amount": 1} for d in range(1, 21)],
     "GROUP BY column 'store' holds ['x']"),
    ([{"day": f"2024-01-{d:02d}", "amount": 1.0} for d in range(1, 21)], "'store'"),
])
def test_history_that_cannot_be_read_is_a_422_naming_the_problem(client, sales_model,
                                                                  history, words):
    response = client.post("/api/projects/ts/models/sales/predict", json={"data": history})
    assert_problem(response, 422, words)


def test_select_from_the_model_with_a_group_forecasts_it_from_training(client, sales_model):
    answer = sql(client, "SELECT store, day, amount FROM ts.sales WHERE store = 'east'")
    assert len(answer["data"]) == 7 and {r[0] for r in answer["data"]} == {"east"}
    assert str(answer["data"][0][1]).startswith(
        (START + dt.timedelta(days=DAYS)).isoformat())


def test_a_history_equal_to_the_training_rows_forecasts_as_the_group_named_alone(
        client, sales_model):
    """The forecast runs from kept parameters and states, fitting nothing: a history that
    repeats a group's training rows gives the forecast the group's name alone gives."""
    history = [{"store": "north", "day": (START + dt.timedelta(days=d)).isoformat(),
                "amount": _sales(0, d)} for d in range(DAYS)]
    given = client.post("/api/projects/ts/models/sales/predict", json={"data": history})
    named = client.post("/api/projects/ts/models/sales/predict",
                        json={"data": [{"store": "north"}]})
    assert given.status_code == named.status_code == 200, given.get_json()
    assert [(r["day"], round(r["amount"], 6), round(r["amount_upper"], 6))
            for r in given.get_json()] == [
        (r["day"], round(r["amount"], 6), round(r["amount_upper"], 6))
        for r in named.get_json()]


def test_describe_tells_how_the_interval_was_calibrated(client, load_model):
    info = _info(client, "load")
    evaluation = info["evaluation"]
    # One series: each cut-off also forecasts from the origins up to the next one, so
    # that the interval's quantiles rest on many out-of-sample errors.
    assert max(evaluation["origins_per_cutoff"]) > 1
    assert 0.9 <= evaluation["interval_quantile_level"] <= 0.99
    assert 0 <= info["accuracies"]["interval_coverage"] <= 1
    tried = {r["name"] for r in client.get(
        "/api/projects/ts/models/load/describe?attribute=model").get_json()}
    assert {"Naive", "SeasonalNaive", "Theta", "ETS", "ARIMA"} <= tried


def test_a_tight_budget_stops_candidates_within_their_cut_offs(client):
    answer = sql(client, "CREATE MODEL ts.hurried FROM pg (SELECT store, day, amount FROM "
                         "sales) PREDICT amount ORDER BY day GROUP BY store HORIZON 7 "
                         "USING join_learn_process = true, time_budget_s = 1")
    assert answer["type"] == "table", answer
    info = _info(client, "hurried")
    # ARIMA fits several orders per series: 3 series at 4 and more cut-offs cannot fit in
    # one second, and it is stopped where it was, saying so.
    assert "ARIMA" in info["stopped"], info["stopped"]
    assert info["stopped"]["ARIMA"].startswith("stopped at ")
    assert "time budget" in info["stopped"]["ARIMA"]
    assert info["model"] not in info["stopped"]
    tried = {r["name"]: r for r in client.get(
        "/api/projects/ts/models/hurried/describe?attribute=model").get_json()}
    assert tried["ARIMA"]["stopped"] == info["stopped"]["ARIMA"]
    assert tried["ARIMA"]["performance"] is None
    rows = client.post("/api/projects/ts/models/hurried/predict",
                       json={"data": [{"store": "south"}]}).get_json()
    assert len(rows) == 7


@pytest.fixture(scope="module")
def promo_model(client) -> dict:
    answer = sql(client, "CREATE MODEL ts.promos FROM pg (SELECT store, day, amount, promo, "
                         "region FROM promos) PREDICT amount ORDER BY day GROUP BY store "
                         "WINDOW 14 HORIZON 1 USING join_learn_process = true, "
                         "time_budget_s = 20")
    assert answer["type"] == "table", answer
    return _info(client, "promos")


def test_exogenous_columns_feed_the_boosting_model(client, promo_model):
    info = promo_model
    assert info["model"] == "Lag features --> HistGradientBoosting", info["accuracies"]
    assert info["exogenous"]["used"] == ["promo", "region"]
    assert {"promo", "region"} <= set(info["inputs"])
    assert info["column_importances"]["promo"] > info["column_importances"]["region"]
    features = {f["column"]: f for f in client.get(
        "/api/projects/ts/models/promos/describe?attribute=features").get_json()}
    assert features["promo"]["role"] == "exogenous"
    assert features["region"]["type"] == "categorical"
    assert features["region"]["values"] == ["coast", "inland"]
    # The day after a promotion sells about 40 more: the history's last row says whether
    # there was one.
    def history(promo_last: int) -> list[dict]:
        return [{"store": "north", "day": (START + dt.timedelta(days=d)).isoformat(),
                 "amount": _promoted(0, d), "region": "inland",
                 "promo": promo_last if d == DAYS - 1 else int(_promo(0, d))}
                for d in range(DAYS)]
    with_promo = client.post("/api/projects/ts/models/promos/predict",
                             json={"data": history(1)}).get_json()
    without = client.post("/api/projects/ts/models/promos/predict",
                          json={"data": history(0)}).get_json()
    assert with_promo[0]["amount"] - without[0]["amount"] > 20, (with_promo[0], without[0])
    # Through SQL with LATEST: the table's rows carry the columns.
    rows = sql(client, "SELECT m.store, m.amount FROM pg.promos AS t JOIN ts.promos AS m "
                       "WHERE t.day > LATEST AND t.store = 'north'")["data"]
    assert len(rows) == 1 and rows[0][0] == "north"


def test_an_exogenous_number_column_holding_text_is_a_422(client, promo_model):
    history = [{"store": "north", "day": (START + dt.timedelta(days=d)).isoformat(),
                "amount": 1.0, "promo": "often" if d == 5 else 0} for d in range(20)]
    assert_problem(client.post("/api/projects/ts/models/promos/predict",
                               json={"data": history}), 422, "'promo' holds 'often'")
