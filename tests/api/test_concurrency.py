"""Uniqueness lives in the database: racing requests never create duplicates."""

import threading
from concurrent.futures import ThreadPoolExecutor

from tests.helpers import skill_body

RACERS = 16


def race(app, method: str, url: str, bodies: list[dict]) -> list[int]:
    """Send the requests from real threads released at the same instant; their statuses."""
    barrier = threading.Barrier(len(bodies))

    def send(body):
        client = app.test_client()
        barrier.wait()
        return getattr(client, method)(url, json=body).status_code

    with ThreadPoolExecutor(len(bodies)) as pool:
        return list(pool.map(send, bodies))


def test_same_skill_name_created_once(app, client):
    client.post("/api/projects", json={"name": "p1"})
    # Case variants of one name: the unique key is the lower-cased name.
    bodies = [skill_body("race" if i % 2 else "RACE") for i in range(RACERS)]
    statuses = race(app, "post", "/api/projects/p1/skills", bodies)
    assert sorted(statuses) == [201] + [409] * (RACERS - 1)
    assert len(client.get("/api/projects/p1/skills").get_json()) == 1


def test_same_project_name_created_once(app, client):
    statuses = race(app, "post", "/api/projects", [{"name": "twin"}] * RACERS)
    assert sorted(statuses) == [201] + [409] * (RACERS - 1)
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb", "twin"]


def test_same_agent_name_created_once(app, client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    bodies = [{"agent": {"name": "bond", "skills": ["s1"]}}] * RACERS
    statuses = race(app, "post", "/api/projects/p1/agents", bodies)
    assert sorted(statuses) == [201] + [409] * (RACERS - 1)
    agents = client.get("/api/projects/p1/agents").get_json()
    assert len(agents) == 1 and [s["name"] for s in agents[0]["skills"]] == ["s1"]


def test_concurrent_param_merges_lose_no_keys_on_distinct_skills(app, client):
    client.post("/api/projects", json={"name": "p1"})
    for i in range(8):
        client.post("/api/projects/p1/skills", json=skill_body(f"s{i}"))
    barrier = threading.Barrier(8)

    def put(i):
        c = app.test_client()
        barrier.wait()
        return c.put(f"/api/projects/p1/skills/s{i}",
                     json={"skill": {"params": {"k": i}}}).status_code

    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(put, range(8))) == [200] * 8
    for i in range(8):
        assert client.get(f"/api/projects/p1/skills/s{i}").get_json()["params"] == {
            "source": "kb", "k": i}


def _merge_race(app, url: str, wrapper: str) -> list[int]:
    return race(app, "put", url, [{wrapper: {"params": {f"k{i}": i}}} for i in range(8)])


def test_concurrent_merges_into_one_skill_lose_no_key(app, client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    assert _merge_race(app, "/api/projects/p1/skills/s1", "skill") == [200] * 8
    params = client.get("/api/projects/p1/skills/s1").get_json()["params"]
    assert params == {"source": "kb", **{f"k{i}": i for i in range(8)}}


def test_concurrent_merges_into_one_agent_lose_no_key(app, client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "params": {"x": 0}}})
    assert _merge_race(app, "/api/projects/p1/agents/a1", "agent") == [200] * 8
    params = client.get("/api/projects/p1/agents/a1").get_json()["params"]
    assert params == {"x": 0, **{f"k{i}": i for i in range(8)}}


def test_concurrent_puts_creating_one_skill(app, client):
    client.post("/api/projects", json={"name": "p1"})
    bodies = [{"skill": {"type": "retrieval", "params": {f"k{i}": i}}} for i in range(8)]
    statuses = sorted(race(app, "put", "/api/projects/p1/skills/fresh", bodies))
    assert statuses == [200] * 7 + [201]
    skills = client.get("/api/projects/p1/skills").get_json()
    assert len(skills) == 1
    assert skills[0]["params"] == {f"k{i}": i for i in range(8)}


def test_creates_racing_a_project_delete_are_201_or_404(app, client):
    client.post("/api/projects", json={"name": "p1"})
    barrier = threading.Barrier(9)

    def create(i):
        c = app.test_client()
        barrier.wait()
        return c.post("/api/projects/p1/skills", json=skill_body(f"s{i}")).status_code

    def delete(_):
        c = app.test_client()
        barrier.wait()
        return c.delete("/api/projects/p1?cascade=true").status_code

    with ThreadPoolExecutor(9) as pool:
        creates = [pool.submit(create, i) for i in range(8)]
        deleted = pool.submit(delete, None)
        statuses = {f.result() for f in creates}
    assert deleted.result() in (204, 409)  # 409: a skill landed between its check and delete
    assert statuses <= {201, 404}, statuses
    from app.extensions import db
    from app.store import Project, Skill

    with app.app_context():  # no skill outlives its project
        orphans = db.session.scalars(db.select(Skill).where(
            Skill.project_id.not_in(db.select(Project.id)))).all()
        assert orphans == []
