"""No N+1: listing runs a fixed number of SQL statements however many rows there are."""

import pytest

from tests.helpers import skill_body


def seed(client, skills: int, agents: int) -> None:
    for i in range(skills):
        client.post("/api/projects/mindsdb/skills", json=skill_body(f"s{i}"))
    for i in range(agents):
        names = [f"s{(i + k) % skills}" for k in range(min(3, skills))]
        client.post("/api/projects/mindsdb/agents", json={"agent": {"name": f"a{i}",
                                                                   "skills": names}})


@pytest.mark.parametrize("url", ["/api/projects/mindsdb/skills", "/api/projects/mindsdb/agents",
                                 "/api/projects/mindsdb/skills?agent=a0"])
def test_list_statement_count_does_not_grow(client, count_statements, url):
    seed(client, 2, 1)
    with count_statements() as small:
        assert client.get(url).status_code == 200
    seed_more = 20
    for i in range(2, seed_more):
        client.post("/api/projects/mindsdb/skills", json=skill_body(f"s{i}"))
    for i in range(1, 12):
        client.post("/api/projects/mindsdb/agents", json={"agent": {
            "name": f"a{i}", "skills": [f"s{i}", f"s{i + 1}", f"s{i + 2}"]}})
    with count_statements() as large:
        body = client.get(url).get_json()
    assert len(body) >= 2
    assert len(large) == len(small), (small.statements, large.statements)
    # project, rows, links (agents: + their skills and those skills' links)
    assert len(large) <= (5 if "agents" in url else 4)


def test_get_one_agent_is_a_fixed_number_of_statements(client, count_statements):
    seed(client, 10, 3)
    with count_statements() as counted:
        assert client.get("/api/projects/mindsdb/agents/a1").status_code == 200
    assert len(counted) <= 4


def test_get_one_skill_is_one_statement(client, count_statements):
    seed(client, 3, 2)
    with count_statements() as counted:
        assert client.get("/api/projects/mindsdb/skills/s1").status_code == 200
    assert len(counted) == 1
