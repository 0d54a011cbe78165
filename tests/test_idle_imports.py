"""What a gunicorn master holds before it forks, when the store has no model yet.

Every page the master holds is in every worker's address space, so whatever it imports
that no request needs costs the idle service memory: scikit-learn, pandas and numpy are
for trainings and predictions (preloaded only when the store holds an active model), and
pyarrow for Arrow and CSV streams (imported by the first one), onnxruntime, tokenizers,
apsw, sqlite-vec and faiss for knowledge bases (imported when one is first used; faiss's
OpenMP runtime, started in a master, would be inherited by forked workers).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def master_env(tmp_path: Path, sqlite_template: str, demo_db: str) -> dict[str, str]:
    """A fresh copy of the migrated store, and the session's demo file: a process started
    without one would first build it (in a child importing scikit-learn, seconds of CPU)."""
    store = tmp_path / "store.db"
    shutil.copy(sqlite_template, store)
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUARRY_")}
    env.update(QUARRY_DATABASE_URL=f"sqlite:///{store}", QUARRY_INSTANCE_PATH=str(tmp_path),
               QUARRY_DEMO_PATH=demo_db, QUARRY_LOG_LEVEL="WARNING", PYTHONPATH=str(ROOT))
    return env


# What gunicorn does in the master with preload_app and QUARRY_PRELOAD_ML on (gunicorn.conf.py:
# import the app, then when_ready), then a look at what got imported.
MASTER = """
import json, sys
import wsgi
from app.services.models import preload_models
with wsgi.app.app_context():
    count = preload_models()
print(json.dumps([count, sorted(m for m in ("sklearn", "pandas", "numpy", "pyarrow",
                                           "onnxruntime", "tokenizers", "apsw", "sqlite_vec",
                                           "faiss")
                                if m in sys.modules)]))
"""


def test_a_master_without_models_imports_no_ml_stack_and_no_arrow(sqlite_template, demo_db,
                                                                  tmp_path):
    env = master_env(tmp_path, sqlite_template, demo_db)
    done = subprocess.run([sys.executable, "-c", MASTER], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    count, heavy = json.loads(done.stdout.strip().splitlines()[-1])
    assert count == 0 and heavy == [], heavy


# What gunicorn's when_ready does with QUARRY_FEDERATION_PRELOAD on (gunicorn.conf.py).
# Then what each worker does after the fork (gunicorn.conf.py's post_fork): where the
# master preloaded the engine, the worker opens its own engine database.
ENGINE = """
import json, sys
import wsgi
from app import after_fork
from app.federation.engine import EXTENSION_KEY
from app.services.startup import preload_engine
with wsgi.app.app_context():
    loaded = preload_engine()
modules = sorted(m for m in ("duckdb", "pyarrow") if m in sys.modules)
after_fork(wsgi.app)
print(json.dumps([loaded, modules, wsgi.app.extensions[EXTENSION_KEY].is_open]))
"""


def test_a_master_preloads_the_engine_only_where_statements_can_federate(sqlite_template,
                                                                         demo_db, tmp_path):
    env = master_env(tmp_path, sqlite_template, demo_db)
    seen = []
    for sources in ({}, {"other": f"sqlite:///{tmp_path / 'other.db'}"}):
        (tmp_path / "other.db").touch()
        env.update(QUARRY_DATA_SOURCES=json.dumps(sources),
                   QUARRY_SQLITE_ROOTS=str(tmp_path))
        done = subprocess.run([sys.executable, "-c", ENGINE], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        seen.append(json.loads(done.stdout.strip().splitlines()[-1]))
    # The demo alone: nothing loaded, no engine in the worker; the demo and one more
    # source: DuckDB and pyarrow in the master, and the worker's engine open.
    assert seen == [[False, [], False], [True, ["duckdb", "pyarrow"], True]], seen



# A stateless MCP request (revision 2026-07-28) in a process that answered none before.
STATELESS = """
import json, sys
import wsgi
meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}
answer = wsgi.app.test_client().post("/mcp", json={
    "jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}},
    headers={"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "server/discover"})
print(json.dumps([answer.status_code, sorted(m for m in sys.modules
                                             if m == "mcp" or m.startswith("mcp."))]))
"""


def test_the_stateless_mcp_revision_imports_no_sdk_package(sqlite_template, demo_db, tmp_path):
    # Its envelope check loads one file of the SDK; the package (its client and server
    # runtimes: anyio, httpx, starlette, uvicorn) stays out of the worker.
    env = master_env(tmp_path, sqlite_template, demo_db)
    done = subprocess.run([sys.executable, "-c", STATELESS], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    status, imported = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == 200 and imported == [], imported
