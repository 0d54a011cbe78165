"""Helpers for the model tests: a project, CREATE MODEL through the REST route, polling."""

from __future__ import annotations

import time

import pytest

IRIS_SQL = ("CREATE MODEL p1.{name} FROM demo (SELECT * FROM iris) PREDICT species "
            "USING join_learn_process = true, time_budget_s = 1")
DIABETES_SQL = ("CREATE MODEL p1.{name} FROM demo (SELECT * FROM diabetes) PREDICT progression "
                "USING join_learn_process = true")


@pytest.fixture
def p1(client):
    """The client, with project p1 created."""
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    return client


def create(client, query: str, project: str = "p1"):
    return client.post(f"/api/projects/{project}/models", json={"query": query})


def wait_for(client, name: str, statuses=("complete", "error"), project: str = "p1",
             timeout_s: float = 60.0) -> dict:
    """Poll GET until the model's status is one of ``statuses``; the record."""
    deadline = time.monotonic() + timeout_s
    while True:
        record = client.get(f"/api/projects/{project}/models/{name}").get_json()
        if record["status"] in statuses or time.monotonic() > deadline:
            return record
        time.sleep(0.1)
