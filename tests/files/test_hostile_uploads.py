"""Hostile uploads against a real gunicorn (issue 30 §5): a JSON file nested 100 000 levels,
an XLSX zip bomb, eight uploads racing to one new name, and the parts that a worker which
died left behind. Each upload is answered in time with a 4xx naming its limit, the worker
that read it lives on without growing much, and no partial file stays in the files folder.
Large CSV uploads streamed into the converter as they arrive (issue 32 §4), with a length
or chunked, land whole."""

from __future__ import annotations

import io
import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import zipfile
import zlib
from pathlib import Path

import openpyxl
import pytest
import requests

from app.sql.files import part_prefix
from tests.live import quarry_env, serving, wait_for_a_new_worker, workers

pytestmark = pytest.mark.slow

MAX_GROWTH = 300 << 20  # bytes of RSS a worker may grow by while refusing an upload


def _dead_pid() -> int:
    """The pid of a process that has ended (and was reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


@pytest.fixture(scope="module")
def served(tmp_path_factory, sqlite_template):
    tmp = tmp_path_factory.mktemp("hostile")
    folder = tmp / "files"
    folder.mkdir()
    # Parts left before the start: by a process that is gone (removed at start), by one
    # that runs (this one: an upload at work, kept), by another host sharing the folder
    # (kept: its process cannot be seen from here).
    dead, alive = part_prefix(_dead_pid()), part_prefix(os.getpid())
    other = ".upload-otherhost-" + part_prefix(_dead_pid()).split("-", 2)[2]
    for name in (f"{dead}a.part", f"{alive}b.part", f"{other}c.part"):
        (folder / name).write_bytes(b"x")
    # A copy of the session's migrated store: no migration run of its own to wait for.
    shutil.copy(sqlite_template, tmp / "store.db")
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                     QUARRY_INSTANCE_PATH=str(tmp), QUARRY_DEMO_SOURCE="false",
                     QUARRY_FILES_DIR=str(folder), QUARRY_WORKERS="1", QUARRY_THREADS="8",
                     QUARRY_FILES_TIMEOUT_S="20")
    with serving(env, tmp / "logs") as server:
        yield server, folder, {"dead": f"{dead}a.part", "alive": f"{alive}b.part",
                               "other": f"{other}c.part"}


def _parts(folder: Path) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n.endswith(".part"))


def _rss(pid: int) -> tuple[int, int]:
    """(resident, peak resident) bytes of process ``pid``."""
    fields = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return int(fields["VmRSS"].split()[0]) * 1024, int(fields["VmHWM"].split()[0]) * 1024


def _put(url: str, name: str, data: bytes, filename: str, **params: str):
    return requests.put(f"{url}/api/files/{name}", params=params, timeout=60,
                        files={"file": (filename, data)}, data={"source_type": "file"})


def _refused_in_time(served, data: bytes, filename: str, status: int, *words: str) -> None:
    server, folder, _ = served
    (worker,) = workers(server.process.pid)
    before = _rss(worker)[0]
    started = time.monotonic()
    answer = _put(server.url, "hostile", data, filename)
    took = time.monotonic() - started
    assert answer.status_code == status, answer.text
    problem = answer.json()
    assert all(w in problem["detail"] for w in words), problem
    assert took < 15, took
    assert workers(server.process.pid) == [worker]  # the same worker, alive
    assert _rss(worker)[1] - before <= MAX_GROWTH, (_rss(worker), before)
    assert requests.get(server.url + "/api/status", timeout=10).status_code == 200
    assert [n for n in _parts(folder) if n.startswith(part_prefix(worker))] == []
    assert "hostile.parquet" not in os.listdir(folder)


def test_a_json_file_nested_100000_levels_is_refused_and_the_worker_lives(served):
    deep = b"[" * 100_000 + b"]" * 100_000
    _refused_in_time(served, deep, "deep.json", 422, "64 levels", "QUARRY_MAX_JSON_DEPTH")
    # Deep inside strings is no nesting: such a file is stored.
    server = served[0]
    flat = b'[{"a": "' + b"[" * 100_000 + b'"}]'
    assert _put(server.url, "flat", flat, "flat.json").status_code == 200


def _deflated(data: bytes, flush: int = zlib.Z_FINISH) -> bytes:
    packer = zlib.compressobj(9, zlib.DEFLATED, -15)
    return packer.compress(data) + packer.flush(flush)


def _zip(entries: list[tuple[str, bytes, int, int]]) -> bytes:
    """A zip of (name, deflated bytes, CRC-32, unpacked size) entries, written by hand:
    zipfile would deflate each byte of a 2 GiB part itself."""
    out, directory = io.BytesIO(), b""
    for name, packed, crc, size in entries:
        raw, offset = name.encode(), out.tell()
        out.write(struct.pack("<IHHHHHIIIHH", 0x04034B50, 20, 0, 8, 0, 0, crc, len(packed),
                              size, len(raw), 0) + raw + packed)
        directory += struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 20, 20, 0, 8, 0, 0, crc,
                                 len(packed), size, len(raw), 0, 0, 0, 0, 0, offset) + raw
    start = out.tell()
    out.write(directory + struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(entries),
                                      len(entries), len(directory), start, 0))
    return out.getvalue()


def xlsx_bomb(sheet_bytes: int = 2047 << 20) -> bytes:
    """A valid workbook (~6 MB) whose first sheet's XML unpacks to ``sheet_bytes``: the same
    1 MiB of rows deflated once and repeated (each copy starts afresh after a full flush)."""
    book = openpyxl.Workbook()
    book.active.append(["a"])
    plain = io.BytesIO()
    book.save(plain)
    head = (b'<?xml version="1.0"?><worksheet xmlns="http://schemas.openxmlformats.org/'
            b'spreadsheetml/2006/main"><sheetData>')
    tail = b"</sheetData></worksheet>"
    row = b'<row><c t="inlineStr"><is><t>xxxxxxxxxxxxxxxx</t></is></c></row>'
    chunk = row * ((1 << 20) // len(row))
    times = (sheet_bytes - len(head) - len(tail)) // len(chunk)
    crc = zlib.crc32(head)
    for _ in range(times):
        crc = zlib.crc32(chunk, crc)
    sheet = (_deflated(head, zlib.Z_FULL_FLUSH) + _deflated(chunk, zlib.Z_FULL_FLUSH) * times
             + _deflated(tail))
    entries = []
    with zipfile.ZipFile(plain) as source:
        for info in source.infolist():
            data = source.read(info.filename)
            if info.filename == "xl/worksheets/sheet1.xml":
                entries.append((info.filename, sheet, zlib.crc32(tail, crc),
                                len(head) + len(chunk) * times + len(tail)))
            else:
                entries.append((info.filename, _deflated(data), zlib.crc32(data), len(data)))
    return _zip(entries)


def test_an_xlsx_zip_bomb_is_refused_from_its_declared_sizes(served):
    bomb = xlsx_bomb()
    assert len(bomb) < 8 << 20
    _refused_in_time(served, bomb, "bomb.xlsx", 413, "unpacks to", "QUARRY_FILES_MAX_BYTES")
    # Within the size limit but packed 300 to 1: a bomb still.
    _refused_in_time(served, xlsx_bomb(300 << 20), "bomb.xlsx", 413, "100 times")


def test_eight_uploads_racing_to_one_new_name_store_one_file(served):
    server, folder, _ = served
    barrier = threading.Barrier(8)
    answers: list[requests.Response] = []

    def upload(i: int) -> None:
        barrier.wait()
        answers.append(_put(server.url, "race", f"who\n{i}\n".encode(), "race.csv"))

    threads = [threading.Thread(target=upload, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(a.status_code for a in answers) == [200] + [409] * 7, [a.text for a in answers]
    assert {a.json()["detail"] for a in answers if a.status_code == 409} == {
        "File with name 'race' already exists"}
    listed = requests.get(server.url + "/api/files/", timeout=10).json()
    assert [f["row_count"] for f in listed if f["name"] == "race"] == [1]
    assert "race.parquet" in os.listdir(folder)
    again = _put(server.url, "race", b"who\n9\n", "race.csv")
    assert again.status_code == 409, again.text
    assert _put(server.url, "race", b"who\n9\n", "race.csv", overwrite="true").status_code == 200


def test_parts_of_a_process_that_is_gone_are_removed_at_start(served):
    server, folder, names = served
    left = _parts(folder)
    assert names["dead"] not in left
    assert names["alive"] in left and names["other"] in left
    # A worker killed in the middle of an upload: the worker started in its place removes
    # the part it left.
    (worker,) = workers(server.process.pid)
    orphan = folder / f"{part_prefix(worker)}upload.part"
    orphan.write_bytes(b"half a file")
    os.kill(worker, signal.SIGKILL)
    wait_for_a_new_worker(server.url)
    assert not orphan.exists()
    assert names["alive"] in _parts(folder)


def _multipart(data: bytes, filename: str) -> tuple[bytes, str]:
    boundary = "quarry-streamed-" + os.urandom(8).hex()
    body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"file\"; "
            f"filename=\"{filename}\"\r\nContent-Type: text/csv\r\n\r\n").encode() + data + \
        f"\r\n--{boundary}--\r\n".encode()
    return body, f"multipart/form-data; boundary={boundary}"


def _start_upload(url: str, name: str, body: bytes, kind: str, first: int) -> socket.socket:
    """A PUT whose headers and first ``first`` bytes of body are sent; the rest is not."""
    host, port = url.removeprefix("http://").split(":")
    conn = socket.create_connection((host, int(port)), timeout=60)
    conn.sendall((f"PUT /api/files/{name} HTTP/1.1\r\nHost: {host}\r\nContent-Type: {kind}"
                  f"\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
                 + body[:first])
    return conn


def _wait_for(check, seconds: float = 20.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.02)
    return check()


def _csv_rows(rows: int) -> bytes:
    return b"id,label\n" + b"".join(b"%d,row %d of a streamed upload\n" % (i, i)
                                    for i in range(rows))


def test_a_csv_upload_is_converted_while_its_body_still_arrives(served):
    server, folder, _ = served
    (worker,) = workers(server.process.pid)
    data = _csv_rows(150_000)  # ~4.5 MiB
    body, kind = _multipart(data, "streamed.csv")
    conn = _start_upload(server.url, "streamed", body, kind, 2 << 20)
    try:
        # Half the body is still to come, and the converter already reads it: its pipe
        # is in the files folder.
        mine = part_prefix(worker)
        assert _wait_for(lambda: [n for n in _parts(folder)
                                  if n.startswith(mine) and n.endswith(".pipe.part")])
        conn.sendall(body[2 << 20:])
        answer = b""
        while chunk := conn.recv(65536):
            answer += chunk
    finally:
        conn.close()
    assert answer.startswith(b"HTTP/1.1 200"), answer[:500]
    assert b'"row_count":150000' in answer.replace(b" ", b""), answer[-500:]
    got = requests.post(server.url + "/api/sql/query", timeout=30, json={
        "query": "SELECT count(*), sum(id), max(label) FROM files.streamed"}).json()
    assert got["data"] == [[150_000, 150_000 * 149_999 // 2,
                            "row 99999 of a streamed upload"]], got
    assert [n for n in _parts(folder) if n.startswith(mine)] == []


def test_an_upload_left_while_its_conversion_runs_leaves_nothing(served):
    server, folder, _ = served
    (worker,) = workers(server.process.pid)
    body, kind = _multipart(_csv_rows(150_000), "left.csv")
    conn = _start_upload(server.url, "left", body, kind, 2 << 20)
    mine = part_prefix(worker)
    try:
        assert _wait_for(lambda: [n for n in _parts(folder)
                                  if n.startswith(mine) and n.endswith(".pipe.part")])
    finally:
        conn.close()  # the client stops sending: the rest never comes
    assert _wait_for(lambda: not [n for n in _parts(folder) if n.startswith(mine)])
    assert "left.parquet" not in os.listdir(folder)
    listed = requests.get(server.url + "/api/files/", timeout=10).json()
    assert "left" not in [f["name"] for f in listed]
    assert workers(server.process.pid) == [worker]
    assert requests.get(server.url + "/api/status", timeout=10).status_code == 200


def _wide_csv(rows: int) -> bytes:
    """A CSV of several MiB: integers, doubles, dates and text, some of it quoted with the
    delimiter and line breaks inside (values that may straddle the reader's buffers)."""
    return b"id,x,day,note\n" + b"".join(
        b'%d,%d.25,2026-%02d-%02d,"note %d, line one\nline two"\n' % (
            i, i % 1000, 1 + i % 12, 1 + i % 28, i) if i % 10 == 0 else
        b"%d,%d.25,2026-%02d-%02d,plain %d\n" % (i, i % 1000, 1 + i % 12, 1 + i % 28, i)
        for i in range(rows))


@pytest.mark.parametrize("transfer", ["content-length", "chunked"])
def test_a_large_upload_lands_whole_with_its_rows_and_types(served, transfer):
    server, folder, _ = served
    (worker,) = workers(server.process.pid)
    rows = 300_000
    data = _wide_csv(rows)
    assert len(data) > 9 << 20  # more than two of the CSV reader's buffers
    body, kind = _multipart(data, "wide.csv")
    name = f"wide_{transfer.replace('-', '_')}"
    if transfer == "chunked":
        # A body of unknown length, in pieces of uneven sizes (requests sends an iterator
        # with Transfer-Encoding: chunked).
        pieces = (body[i:i + 70_001] for i in range(0, len(body), 70_001))
        answer = requests.put(f"{server.url}/api/files/{name}", data=pieces, timeout=120,
                              headers={"Content-Type": kind})
        assert answer.request.headers.get("Transfer-Encoding") == "chunked"
    else:
        answer = requests.put(f"{server.url}/api/files/{name}", data=body, timeout=120,
                              headers={"Content-Type": kind})
        assert answer.request.headers["Content-Length"] == str(len(body))
    assert answer.status_code == 200, answer.text
    assert answer.json()["row_count"] == rows
    assert answer.json()["columns"] == ["id", "x", "day", "note"]
    got = requests.post(server.url + "/api/sql/query", timeout=60, json={
        "query": f"SELECT count(*), sum(id), sum(x), min(day), max(day), "
                 f"count(DISTINCT note), max(length(note)) FROM files.{name}"}).json()
    assert got["data"] == [[rows, rows * (rows - 1) // 2,
                            sum(i % 1000 for i in range(rows)) + rows * 0.25,
                            "2026-01-01", "2026-12-28", rows,
                            len("note 299990, line one\nline two")]], got
    schema = requests.get(f"{server.url}/api/console/schema", timeout=10).json()
    files = next(s for s in schema["data_sources"] if s["name"] == "files")
    assert next(t for t in files["tables"] if t["name"] == name)["columns"] == [
        {"name": "id", "type": "int64"}, {"name": "x", "type": "double"},
        {"name": "day", "type": "date32[day]"}, {"name": "note", "type": "string"}]
    quoted = requests.post(server.url + "/api/sql/query", timeout=60, json={
        "query": f"SELECT note FROM files.{name} WHERE id IN (0, 1, 299990) ORDER BY id"})
    assert quoted.json()["data"] == [["note 0, line one\nline two"], ["plain 1"],
                                     ["note 299990, line one\nline two"]]
    assert [n for n in _parts(folder) if n.startswith(part_prefix(worker))] == []
    assert f"{name}.parquet" in os.listdir(folder)
