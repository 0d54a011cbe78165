"""Uploaded files as a data source: where their bytes live, how an upload becomes Parquet.

An upload is streamed to a temporary file in the files folder (FILES_DIR), converted there
by DuckDB into a Parquet file of detected column types, and only then moved to its final
name with ``os.replace``: a reader opens the old file or the new one, never half of one,
and a failed conversion leaves nothing behind. Every instance that shares the metadata
store must share FILES_DIR (docs/files.md).

Reading is the federation engine's (``federation/files.py``): a file is handed to DuckDB as
an Arrow dataset Quarry opened, so the SQL of a statement never names a path.
"""

from __future__ import annotations

import os
import re
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app

from ..jsonio import pieces_nest_deeper
from ..lazy import on_first_use
from .errors import ErrorCode, SqlError
from .functions.duckdb import DuckDbPolicy
from .sources import DataSource

FILES_SOURCE = "files"
FILES_DIALECT = "files"
# Every temporary file of an upload is named .upload-<host>-<pid>-….part, so that a process
# starting can tell the parts of a worker that died (remove_stale_parts) from those of a
# worker at work, on this host or on another one that shares the folder.
_PART_PREFIX, _PART = ".upload-", ".part"
# A workbook part that unpacks to more than this many times its packed size is a zip bomb,
# not a sheet: sheets' XML packs 10-20 to 1 (measured on openpyxl's and Excel's files).
XLSX_MAX_RATIO = 100
_RATIO_FROM_BYTES = 1 << 20  # small parts may pack as they like
# The address space of the process that reads a workbook's sheet (app/sql/sheet.py).
XLSX_MEMORY_BYTES = 1 << 30
_SHEET_SCRIPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sheet.py")
# What is read of a file to tell its delimiter and encoding, and what an upload holds back
# before its format is known (``StreamedUpload``).
_HEAD_BYTES = 1 << 20
# DuckDB's CSV reader holds two buffers of 16 times the longest line it accepts (2 MB by
# default): 64 MiB, most of what a worker grew by during an upload. Buffers of 4 MiB convert
# as fast (measured on the 74 MiB CSV of bench/files.py: peak growth of the converter 91 MiB
# → 35 MiB, same time). Given a buffer size alone, DuckDB would raise the longest line it
# accepts to it: the default is kept, so a file is refused or read exactly as before.
_CSV_BUFFER_BYTES = 4 << 20
_CSV_MAX_LINE_BYTES = 2_000_000
# The Parquet writer holds a whole row group until it writes it: DuckDB's 122 880 rows are
# ~9 MiB of a CSV of 77-byte rows, but 120 MiB of one of 1 KiB rows, which overran the
# converter's memory limit (413). A CSV's row groups hold as many rows as ~8 MiB of its text
# (told from its first MiB), within DuckDB's bounds: 2 048 (it rounds up to that) to its
# default (measured on a 293 MiB CSV of 1 KiB rows: stored, the converter's peak 46 MiB).
_ROW_GROUP_TEXT_BYTES = 8 << 20
_ROW_GROUP_ROWS = (2048, 122_880)
# pyarrow (and pandas with it) loads with the first upload or file read, not with the app.
pq = on_first_use("pyarrow.parquet")
pa = on_first_use("pyarrow")


class FileFormatError(Exception):
    """An upload that is not a readable file of its format (what and where, in words)."""


class NestedTooDeep(FileFormatError):
    """A JSON file nesting arrays or objects deeper than the limit (a parser recursing over
    it would overflow its stack and take the worker with it)."""


class ConversionTooLarge(Exception):
    """The file is readable but beyond what the converter may spend on it: more memory than
    it may use (e.g. a single value of hundreds of MiB), a workbook that unpacks beyond the
    size limit, or more time than the upload's time limit (the message names the limit)."""


@dataclass(frozen=True)
class Limits:
    """What converting one upload may take."""

    max_bytes: int     # QUARRY_FILES_MAX_BYTES: also what a workbook may unpack to
    max_depth: int     # QUARRY_MAX_JSON_DEPTH: nesting of a JSON file
    timeout_s: float   # QUARRY_FILES_TIMEOUT_S: the whole conversion


@dataclass
class Converted:
    row_count: int
    columns: list[str]
    size: int          # bytes of the stored Parquet file
    part: str          # where it waits until published


def files_dir(app: Flask | None = None) -> str:
    app = app or current_app
    return app.config.get("FILES_DIR") or os.path.join(app.instance_path, "files")


def stored_path(name_key: str) -> str:
    """The Parquet file of a file named ``name_key`` (a checked, lower-cased name: the
    naming rule keeps separators, dots and NUL out of it before it gets here)."""
    if not re.fullmatch(r"[a-z_-][a-z0-9_-]{0,62}", name_key):
        raise ValueError(f"not a checked file name: {name_key!r}")
    return os.path.join(files_dir(), f"{name_key}.parquet")


def upload_target() -> Any:
    """A new temporary file in the files folder, open for writing the upload's bytes (on the
    same file system as the stored files, so that the final move is a rename)."""
    folder = files_dir()
    os.makedirs(folder, exist_ok=True)
    return tempfile.NamedTemporaryFile(dir=folder, prefix=part_prefix(), suffix=_PART,
                                       delete=False)


class StreamedUpload:
    """The file part of an upload as it arrives: written to its temporary file (``name``)
    and, once its first MiB says CSV or TSV, also into the converter at once, through a
    pipe in the files folder, so that converting overlaps receiving instead of following
    it (an upload of 150 MiB is received in ~0.7 s). The file on disk stays the upload:
    any other format, a change of mind (``cancel``) or a conversion that fails (its error
    is then told by converting the file on disk again, in the same words as ever) leave
    the conversion to ``convert``.

    Werkzeug's form parser writes the part through ``write``; ``close`` ends the pipe.
    """

    def __init__(self, target_key: str, original_name: str | None, header: bool | None,
                 limits: Limits) -> None:
        self.file = upload_target()
        self.name = self.file.name
        self.kind: str | None = None    # csv or tsv once its conversion started
        self.header = header
        self._key, self._original, self._limits = target_key, original_name, limits
        self._head = bytearray()
        self._decided = False
        self._pipe: str | None = None
        self._fd: int | None = None
        self._thread: threading.Thread | None = None
        self._conn: Any = None
        self._lock = threading.Lock()
        self._stopped = False
        self._outcome: Converted | BaseException | None = None
        self._part: str | None = None
        self._taken = False

    def write(self, data: bytes) -> int:
        self.file.write(data)
        if not self._decided:
            self._head += data
            if len(self._head) >= _HEAD_BYTES:
                self._decide()
        elif self._fd is not None:
            self._feed(data)
        return len(data)

    def _decide(self) -> None:
        self._decided = True
        head, self._head = bytes(self._head), bytearray()
        try:
            kind = sniff_head(head, self._original)
        except FileFormatError:
            return  # convert() says so, from the file
        if kind not in ("csv", "tsv"):
            return
        self.kind = kind
        self._part = _part_name(self._key)
        self._pipe = self._part.removesuffix(f".parquet{_PART}") + f".pipe{_PART}"
        os.mkfifo(self._pipe, 0o600)
        # Read and write: opening never waits for the reader, and the reader sees the end
        # of the file only when this end closes.
        self._fd = os.open(self._pipe, os.O_RDWR | os.O_NONBLOCK)
        self._thread = threading.Thread(target=self._convert, args=(head,), daemon=True,
                                        name="quarry-upload")
        self._thread.start()
        self._feed(head)

    def _convert(self, head: bytes) -> None:
        try:
            _copy_to_parquet(self._pipe, self.kind, self._part, self.header, self._limits,
                             None, head, self._opened)
            self._outcome = _converted(self._part)
        except BaseException as exc:  # noqa: BLE001 - handed to the request's thread
            self._outcome = exc
        finally:
            with self._lock:
                self._conn = None  # closed: nothing to interrupt

    def _opened(self, conn: Any) -> None:
        with self._lock:
            self._conn = conn
            stopped = self._stopped
        if stopped:
            conn.interrupt()

    def _feed(self, data: bytes) -> None:
        view = memoryview(data)
        while view:
            if not self._thread.is_alive():  # the converter stopped: the disk has it all
                self._end_pipe()
                return
            _, ready, _ = select.select([], [self._fd], [], 0.1)
            if ready:
                try:
                    view = view[os.write(self._fd, view[:1 << 16]):]
                except BlockingIOError:
                    continue

    def _end_pipe(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def seek(self, offset: int, whence: int = 0) -> int:
        """Werkzeug rewinds the part at its end: the part is all written."""
        self.close()
        return 0

    def close(self) -> None:
        """The part is all written (or the upload ends here)."""
        # A file smaller than its head is converted from the disk: the converter might not
        # have opened the pipe yet, and it would wait forever for a writer once this end
        # closed. A larger head fills the pipe, so the converter has opened it by now.
        self._decided = True
        self._head = bytearray()
        self.file.close()
        self._end_pipe()

    def result(self) -> Converted:
        """The converted file (the caller owns its part): the conversion is given the
        upload's time limit from now, the body being all received. FileFormatError,
        ConversionTooLarge as ``convert`` raises them."""
        self.close()
        timer = threading.Timer(self._limits.timeout_s, self._interrupt)
        timer.daemon = True
        timer.start()
        try:
            self._thread.join()
        finally:
            timer.cancel()
        outcome = self._outcome
        if isinstance(outcome, BaseException):
            raise outcome
        self._taken = True
        return outcome

    def _interrupt(self) -> None:
        with self._lock:
            self._stopped = True
            if self._conn is not None:
                self._conn.interrupt()

    def cancel(self) -> None:
        """Stop the conversion and remove all but the file on disk (idempotent)."""
        self.close()
        if self._thread is not None:
            self._interrupt()
            self._thread.join()
        if not self._taken:
            discard(self._part)
        discard(self._pipe)


def _host_tag() -> str:
    return re.sub(r"[^A-Za-z0-9]", "", socket.gethostname())[:32] or "host"


def part_prefix(pid: int | None = None) -> str:
    """How the names of the temporary files of process ``pid`` (default: this one) begin."""
    return f"{_PART_PREFIX}{_host_tag()}-{os.getpid() if pid is None else pid}-"


def remove_stale_parts(app: Flask) -> list[str]:
    """Remove the temporary files that a process of this host which is gone left in the files
    folder (a worker killed in the middle of an upload); the names removed.

    Run when the app starts and when a gunicorn worker starts (the master starts one in
    place of a worker that died). A part whose process still runs, or of another host
    sharing the folder, is left alone: it may be an upload at work.
    """
    folder = files_dir(app)
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    mine = f"{_PART_PREFIX}{_host_tag()}-"
    removed = []
    for name in names:
        found = re.match(r"(\d+)-", name[len(mine):]) if name.startswith(mine) else None
        if found is None or not name.endswith(_PART) or _running(int(found.group(1))):
            continue
        discard(os.path.join(folder, name))
        removed.append(name)
    if removed:
        app.logger.warning("removed %d upload part(s) left by a process that is gone: %s",
                           len(removed), ", ".join(removed))
    return removed


def _running(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def discard(path: str | None) -> None:
    if path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def sniff_format(path: str, original_name: str | None, sheet: str | None) -> str:
    """csv | tsv | parquet | json | xlsx, from the first bytes (an extension can lie, and
    mindsdb_sdk sends a DataFrame as a part without one), CSV by default."""
    with open(path, "rb") as handle:
        head = handle.read(4096)
    return sniff_head(head, original_name)


def sniff_head(head: bytes, original_name: str | None) -> str:
    """``sniff_format`` from the file's first bytes (4 KiB or more)."""
    head = head[:4096]
    if not head.strip():
        raise FileFormatError("The file is empty")
    if head.startswith(b"PAR1"):
        return "parquet"
    if head.startswith(b"PK\x03\x04"):
        return "xlsx"
    first = head.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if first in (b"[", b"{"):
        return "json"
    ext = os.path.splitext(original_name or "")[1].lower()
    if ext == ".tsv":
        return "tsv"
    if ext in (".parquet", ".xlsx", ".xls"):
        # Claimed by its name but its bytes say otherwise.
        raise FileFormatError(f"The file is not a valid {ext[1:].upper()} file "
                              "(its first bytes are not those of that format)")
    return "csv"


def write_rows(handle: Any, columns: list[str], records: list[tuple]) -> None:
    """Write rows (a query's answer) to ``handle`` as Parquet, each column typed as
    pyarrow infers it from its values (a column of NULLs only: text)."""
    arrays = []
    for i, _ in enumerate(columns):
        values = [record[i] for record in records]
        array = pa.array(values)
        arrays.append(array.cast(pa.string()) if pa.types.is_null(array.type) else array)
    pq.write_table(pa.Table.from_arrays(arrays, names=columns), handle)


def convert(source: str, kind: str, target_key: str, limits: Limits, sheet: str | None = None,
            header: bool | None = None) -> Converted:
    """Convert the upload at ``source`` into a Parquet file beside ``target_key``'s final
    one (``Converted.part``; ``publish`` moves it into place). ``header``: whether a CSV's
    (or a sheet's) first row names the columns; None: DuckDB's sniffer decides. Raises
    FileFormatError when the file cannot be read, ConversionTooLarge beyond ``limits``,
    with nothing left behind either way."""
    deadline = time.monotonic() + limits.timeout_s
    part = _part_name(target_key)
    sheet_csv = None
    try:
        if kind == "json":
            _check_depth(source, limits.max_depth)
        if kind == "xlsx":  # one sheet as CSV first: DuckDB then detects its column types
            sheet_csv = f"{part}.csv{_PART}"
            _sheet_as_csv(source, sheet, sheet_csv, limits, deadline)
            source, kind = sheet_csv, "csv"
        _copy_to_parquet(source, kind, part, header, limits, deadline)
        return _converted(part)
    except BaseException:
        discard(part)
        raise
    finally:
        discard(sheet_csv)


def _part_name(target_key: str) -> str:
    prefix = os.path.join(os.path.dirname(stored_path(target_key)), part_prefix())
    return f"{prefix}{target_key}-{os.urandom(4).hex()}.parquet{_PART}"


def _converted(part: str) -> Converted:
    meta = pq.ParquetFile(part).metadata
    if meta.num_columns == 0:
        raise FileFormatError("The file has no columns")
    columns = [meta.schema.column(i).name for i in range(meta.num_columns)]
    return Converted(meta.num_rows, columns, os.path.getsize(part), part)


def _copy_to_parquet(source: str, kind: str, part: str, header: bool | None, limits: Limits,
                     deadline: float | None, head: bytes | None = None,
                     opened: Callable[[Any], None] | None = None) -> None:
    """``deadline`` None: the caller stops it (``opened`` hands it the connection: the
    source is then a pipe, ``head`` its first bytes)."""
    conn = _converter()
    timer = None
    try:
        if opened is not None:
            opened(conn)
        relation, group_rows = _reader(conn, source, kind, header, head)
        if deadline is not None:
            if time.monotonic() >= deadline:
                raise _out_of_time(limits)
            # DuckDB stops a statement interrupted from another thread: the time limit.
            timer = threading.Timer(deadline - time.monotonic(), conn.interrupt)
            timer.daemon = True
            timer.start()
        rows_option = f", ROW_GROUP_SIZE {group_rows}" if group_rows else ""
        conn.execute(f"COPY (SELECT * FROM {relation}) TO '{_quoted(part)}' "
                     f"(FORMAT parquet, COMPRESSION zstd{rows_option})")
    except ConversionTooLarge:
        raise
    except Exception as exc:  # noqa: BLE001 - DuckDB's error types, in its words
        if type(exc).__name__ == "InterruptException" or \
                (deadline is not None and time.monotonic() >= deadline):
            raise _out_of_time(limits) from None
        if type(exc).__name__ == "OutOfMemoryException":  # not the file's fault
            raise ConversionTooLarge("The file cannot be converted within the converter's "
                                     f"memory limit: {str(exc).splitlines()[0]}") from None
        if opened is not None:  # a pipe cannot be read again to tell where: the caller
            raise FileFormatError(str(exc)) from None  # reads the file on disk for that
        raise FileFormatError(_describe_error(kind, exc, conn, source)) from None
    finally:
        if timer is not None:
            timer.cancel()
        conn.close()


def _out_of_time(limits: Limits) -> ConversionTooLarge:
    return ConversionTooLarge(f"The file cannot be converted within the time limit of "
                              f"{limits.timeout_s:g} s (QUARRY_FILES_TIMEOUT_S)")


def _check_depth(source: str, max_depth: int) -> None:
    """Refuse a JSON file nesting deeper than ``max_depth``, from its bytes, before a parser
    (which recurses per level) sees it."""
    with open(source, "rb") as handle:
        if pieces_nest_deeper(iter(lambda: handle.read(1 << 20), b""), max_depth):
            raise NestedTooDeep(f"The JSON file nests arrays or objects more than "
                                f"{max_depth} levels deep (the limit, "
                                f"QUARRY_MAX_JSON_DEPTH)")


def _check_workbook(source: str, max_bytes: int) -> None:
    """Refuse a workbook whose parts, as its zip directory declares them, unpack beyond
    ``max_bytes`` or pack more densely than a sheet can: before a byte is inflated. (The
    declared sizes hold: Python's zip reader stops at a part's declared size.)"""
    try:
        with zipfile.ZipFile(source) as book:
            parts = book.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise FileFormatError(f"The XLSX file cannot be read: {exc}") from None
    unpacked = sum(p.file_size for p in parts)
    if unpacked > max_bytes:
        raise ConversionTooLarge(f"The XLSX file unpacks to {unpacked} bytes, more than the "
                                 f"limit of {max_bytes} bytes (QUARRY_FILES_MAX_BYTES)")
    for p in parts:
        if p.file_size > _RATIO_FROM_BYTES and \
                p.file_size > XLSX_MAX_RATIO * max(p.compress_size, 1):
            raise ConversionTooLarge(
                f"The XLSX file's part {p.filename} unpacks to "
                f"{p.file_size // max(p.compress_size, 1)} times its packed size, more "
                f"than the limit of {XLSX_MAX_RATIO} times (a zip bomb, not a sheet)")


def _sheet_as_csv(source: str, sheet: str | None, target: str, limits: Limits,
                  deadline: float) -> None:
    """The first sheet (or ``sheet``) of a workbook, written row by row as a CSV file at
    ``target`` by a child process of capped memory, within the upload's time limit."""
    _check_workbook(source, limits.max_bytes)
    command = [sys.executable, "-I", _SHEET_SCRIPT, source, sheet or "", target,
               str(XLSX_MEMORY_BYTES)]
    try:
        done = subprocess.run(command, capture_output=True, text=True, check=False,
                              timeout=max(deadline - time.monotonic(), 0.001))
    except subprocess.TimeoutExpired:  # run() killed it
        raise _out_of_time(limits) from None
    if done.returncode == 0:
        return
    reason = (done.stderr.strip().splitlines() or [""])[-1].replace(source, "the file")
    if done.returncode == 2 and reason:
        raise FileFormatError(reason)
    raise ConversionTooLarge(f"The XLSX file cannot be read within the converter's memory "
                             f"limit of {XLSX_MEMORY_BYTES >> 20} MiB")


def publish(converted: Converted, target_key: str) -> None:
    """Move a converted file into place: a rename, so that a reader opens the old file or
    the new one, never half of one."""
    os.replace(converted.part, stored_path(target_key))


def remove(name_key: str) -> None:
    discard(stored_path(name_key))


def _converter() -> Any:
    # DuckDB loads on the first upload (a worker that never converts never pays for it).
    # A connection of its own: the SQL here is Quarry's (reading one upload), never a
    # caller's. One thread, 96 MiB at most, and bounded CSV buffers and row groups
    # (``_reader``): a worker grows by ~40 MiB during a CSV upload (bench/files.py). Two
    # threads read a pipe no faster, for more CPU time, and hold more row groups.
    import duckdb

    return duckdb.connect(":memory:", config={
        "threads": 1, "memory_limit": "96MiB", "preserve_insertion_order": True,
        "autoinstall_known_extensions": False, "autoload_known_extensions": False})


def _quoted(path: str) -> str:
    return path.replace("'", "''")


def _reader(conn: Any, source: str, kind: str, header: bool | None = None,
            head: bytes | None = None) -> tuple[str, int | None]:
    """DuckDB's reader of the file at ``source``, and the rows of a row group of its Parquet
    file (None: DuckDB's default); ``head``: its first MiB (the file itself cannot be read
    twice: a pipe), else read from it."""
    path = _quoted(source)
    if kind == "parquet":
        return f"read_parquet('{path}')", None
    if kind == "json":
        return f"read_json('{path}', format='auto')", None
    if head is None:
        with open(source, "rb") as handle:
            head = handle.read(_HEAD_BYTES)
    delim = "\\t" if kind == "tsv" else _delimiter(head)
    options = (f"delim=E'{delim}', skip=0, strict_mode=true, "
               "null_padding=false") if delim == "\\t" else \
        (f"delim='{delim}', skip=0, strict_mode=true, null_padding=false")
    options += f", buffer_size={_CSV_BUFFER_BYTES}, max_line_size={_CSV_MAX_LINE_BYTES}"
    if header is not None:  # else DuckDB's sniffer decides whether the first row names
        options += f", header={str(header).lower()}"
    encoding = _encoding(head)
    if encoding != "utf-8":
        options += f", encoding='{encoding}'"
    return f"read_csv('{path}', {options})", _row_group_rows(head)


def _row_group_rows(head: bytes) -> int:
    """Rows of a row group holding about _ROW_GROUP_TEXT_BYTES of a CSV whose first bytes
    are ``head`` (a value's line breaks make its rows look shorter: larger groups)."""
    row_bytes = len(head) / max(head.count(b"\n"), 1)
    low, high = _ROW_GROUP_ROWS
    return min(max(int(_ROW_GROUP_TEXT_BYTES / max(row_bytes, 1)), low), high)


def _delimiter(head: bytes) -> str:
    """The delimiter the header line (of the file's first bytes ``head``) uses most
    (DuckDB's sniffer, given a free hand, would rather read a ragged file as one column
    than say where it is ragged)."""
    header = head[:65536].split(b"\n", 1)[0]
    counts = {d: header.count(d.encode()) for d in (",", "\t", ";", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _encoding(head: bytes) -> str:
    """utf-8 when the first MiB (``head``) decodes as such, else latin-1 (any byte is
    latin-1)."""
    head = head[:_HEAD_BYTES]
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Not merely a character cut at the end of the first MiB.
        if len(head) < _HEAD_BYTES or exc.start < len(head) - 4:
            return "latin-1"
    return "utf-8"


def _describe_error(kind: str, exc: Exception, conn: Any, source: str) -> str:
    # DuckDB names the upload's temporary file: the caller never knew that path.
    text = str(exc).strip().replace(f"'{source}'", "the file").replace(source, "the file")
    if kind in ("csv", "tsv") and "sniffing" in text:
        # The sniffer failed: read it again with every column as text, which names the
        # first line that does not have the header's number of fields.
        text = (_strict_error(conn, source, kind) or text).replace(source, "the file")
    lines = [line for line in text.splitlines() if line.strip()]
    head = lines[0].replace("Invalid Input Error: ", "") if lines else type(exc).__name__
    detail = next((line for line in lines[1:] if line.startswith("Expected Number")), "")
    label = {"csv": "CSV", "tsv": "TSV", "parquet": "Parquet", "json": "JSON"}[kind]
    return f"The {label} file cannot be read: {head}" + (f" ({detail})" if detail else "")


def _strict_error(conn: Any, source: str, kind: str) -> str | None:
    with open(source, "rb") as handle:
        delim = "\t" if kind == "tsv" else _delimiter(handle.read(65536))
    with open(source, encoding="utf-8", errors="replace") as handle:
        header = handle.readline().rstrip("\r\n").split(delim)
    columns = "{" + ", ".join(f"'c{i}': 'VARCHAR'" for i in range(len(header))) + "}"
    sql_delim = "E'\\t'" if delim == "\t" else f"'{delim}'"
    try:
        conn.execute(f"SELECT count(*) FROM read_csv('{_quoted(source)}', delim={sql_delim}, "
                     f"quote='\"', escape='\"', header=true, auto_detect=false, "
                     f"columns={columns}, strict_mode=true, null_padding=false)").fetchall()
    except Exception as exc:  # noqa: BLE001 - the error is the answer
        return str(exc)
    return None


def file_columns(name_key: str) -> list[str]:
    """The column names of a stored file (its Parquet schema)."""
    try:
        return list(pq.read_schema(stored_path(name_key)).names)
    except FileNotFoundError:
        raise SqlError(ErrorCode.UNKNOWN_TABLE,
                       f"Table not found: {FILES_SOURCE}.{name_key} (upload it with "
                       f"PUT /api/files/{name_key})") from None


def file_schema(name_key: str) -> list[tuple[str, str]]:
    """(column, type) of a stored file, the types as Arrow names them."""
    try:
        return [(f.name, str(f.type)) for f in pq.read_schema(stored_path(name_key))]
    except FileNotFoundError:  # deleted since it was listed
        return []


def files_source(settings: Any, catalog: Callable[[], list[dict[str, Any]]] | None = None
                 ) -> DataSource:
    """The data source ``files``: its tables are the uploaded files, read by the federation
    engine (it has no connection of its own); ``catalog`` lists them."""

    def no_connection() -> Any:
        raise SqlError(ErrorCode.UNSUPPORTED, "The files source is read by the engine only")

    return DataSource(name=FILES_SOURCE, dialect=FILES_DIALECT, sqlglot_dialect="duckdb",
                      timeout_s=settings["SQL_TIMEOUT_S"], max_rows=settings["SQL_MAX_ROWS"],
                      connect=no_connection, dispose=lambda: None, engine_name="files",
                      functions=DuckDbPolicy(),  # the engine's allow-list
                      engine_only=True, catalog=catalog)
