"""The demo data source: an SQLite file built from datasets that ship inside scikit-learn.

No download: iris, diabetes (raw, unscaled), wine and breast_cancer are bundled with the
package. The file is written to a temporary name and renamed into place, because several
gunicorn workers may start (and build it) at the same time; rename is atomic.
"""

from __future__ import annotations

import functools
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from typing import Any
from urllib.parse import quote

DEMO_VERSION = 1  # stored as PRAGMA user_version; bump to rebuild old files
_BUILD_IN_CHILD = "import sys; from app.sql.demo import build_demo; build_demo(sys.argv[1])"


def column_name(feature: str) -> str:
    """'sepal length (cm)' -> 'sepal_length'; 'od280/od315_of_diluted_wines' -> 'od280_od315…'."""
    text = re.sub(r"\([^)]*\)", "", feature).strip().lower()
    return re.sub(r"[^0-9a-z]+", "_", text).strip("_")


@functools.cache
def demo_tables() -> dict[str, tuple[list[str], list[tuple[Any, ...]]]]:
    """table -> (columns, rows). Cached per process: building many apps stays cheap."""
    from sklearn import datasets  # slow to import; only when a file must be built

    tables: dict[str, tuple[list[str], list[tuple[Any, ...]]]] = {}

    def add(table: str, bunch: Any, target: str, labels: bool) -> None:
        columns = [column_name(f) for f in bunch.feature_names] + [target]
        names = list(bunch.target_names) if labels else None
        rows = []
        for features, value in zip(bunch.data.tolist(), bunch.target.tolist(), strict=True):
            rows.append((*features, str(names[int(value)]) if names else value))
        tables[table] = (columns, rows)

    add("iris", datasets.load_iris(), "species", labels=True)
    add("diabetes", datasets.load_diabetes(scaled=False), "progression", labels=False)
    add("wine", datasets.load_wine(), "cultivar", labels=True)
    add("breast_cancer", datasets.load_breast_cancer(), "diagnosis", labels=True)
    return tables


def _sql_type(values: list[Any]) -> str:
    if all(isinstance(v, str) for v in values):
        return "TEXT"
    if all(float(v).is_integer() for v in values):
        return "INTEGER"
    return "REAL"


def _write(path: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for table, (columns, rows) in demo_tables().items():
            types = [_sql_type([r[i] for r in rows]) for i in range(len(columns))]
            rows = [tuple(int(v) if t == "INTEGER" else v for v, t in zip(r, types, strict=True))
                    for r in rows]
            ddl = ", ".join(f'"{c}" {t}' for c, t in zip(columns, types, strict=True))
            conn.execute(f'CREATE TABLE "{table}" ({ddl})')
            marks = ", ".join("?" for _ in columns)
            conn.executemany(f'INSERT INTO "{table}" VALUES ({marks})', rows)
        conn.execute(f"PRAGMA user_version = {DEMO_VERSION}")
        conn.commit()
    finally:
        conn.close()


def _is_current(path: str) -> bool:
    try:
        conn = sqlite3.connect("file:" + quote(os.path.abspath(path)) + "?mode=ro", uri=True)
        try:
            return conn.execute("PRAGMA user_version").fetchone()[0] == DEMO_VERSION
        finally:
            conn.close()
    except sqlite3.Error:
        return False


def build_demo(path: str) -> str:
    """(Re)build the demo file at ``path`` atomically; returns the path."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".demo-", suffix=".tmp", dir=folder)
    os.close(fd)
    try:
        os.unlink(tmp)  # sqlite3 creates it afresh
        _write(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def ensure_demo(path: str) -> str:
    """Build the demo file if it is missing or from an older version (cheap when present).

    The build runs in a child process: importing scikit-learn for its datasets would
    otherwise stay in this process for good (a gunicorn master shares it with its workers;
    ~120 MiB that serving SQL never needs).
    """
    if not (os.path.exists(path) and _is_current(path)):
        subprocess.run([sys.executable, "-c", _BUILD_IN_CHILD, path], check=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.dirname(
                           os.path.abspath(__file__)))))
    return path

