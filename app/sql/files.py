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
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from flask import Flask, current_app

from ..lazy import on_first_use
from .errors import ErrorCode, SqlError
from .functions.duckdb import DuckDbPolicy
from .sources import DataSource

FILES_SOURCE = "files"
FILES_DIALECT = "files"
_PART = ".part"
# pyarrow (and pandas with it) loads with the first upload or file read, not with the app.
pq = on_first_use("pyarrow.parquet")


class FileFormatError(Exception):
    """An upload that is not a readable file of its format (what and where, in words)."""


class ConversionTooLarge(Exception):
    """The file is readable but needs more memory to convert than the converter may use
    (e.g. a single value of hundreds of MiB)."""


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
    return tempfile.NamedTemporaryFile(dir=folder, prefix=".upload-", suffix=_PART,
                                       delete=False)


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


def convert(source: str, kind: str, target_key: str, sheet: str | None = None) -> Converted:
    """Convert the upload at ``source`` into a Parquet file beside ``target_key``'s final
    one (``Converted.part``; ``publish`` moves it into place); raises FileFormatError, with
    nothing left behind, when it cannot be read."""
    part = f"{stored_path(target_key)}.{os.getpid()}.{os.urandom(4).hex()}{_PART}"
    conn = _converter()
    sheet_csv = None
    try:
        if kind == "xlsx":  # one sheet as CSV first: DuckDB then detects its column types
            sheet_csv = _sheet_as_csv(source, sheet, part)
            source, kind = sheet_csv, "csv"
        relation = _reader(conn, source, kind)
        try:
            conn.execute(f"COPY (SELECT * FROM {relation}) TO '{_quoted(part)}' "
                         "(FORMAT parquet, COMPRESSION zstd)")
        except Exception as exc:  # noqa: BLE001 - DuckDB's error types, in its words
            if type(exc).__name__ == "OutOfMemoryException":  # not the file's fault
                raise ConversionTooLarge(str(exc).splitlines()[0]) from None
            raise FileFormatError(_describe_error(kind, exc, conn, source)) from None
        meta = pq.ParquetFile(part).metadata
        if meta.num_columns == 0:
            raise FileFormatError("The file has no columns")
        columns = [meta.schema.column(i).name for i in range(meta.num_columns)]
        return Converted(meta.num_rows, columns, os.path.getsize(part), part)
    except BaseException:
        discard(part)
        raise
    finally:
        conn.close()
        discard(sheet_csv)


def _sheet_as_csv(source: str, sheet: str | None, part: str) -> str:
    """The first sheet (or ``sheet``) of a workbook, written row by row as a CSV file (the
    workbook is read in openpyxl's read-only mode: streamed, never whole in memory)."""
    import csv
    import zipfile

    import openpyxl  # loads with the first XLSX upload
    from openpyxl.utils.exceptions import InvalidFileException

    handle = open(source, "rb")  # noqa: SIM115 - closed below, with the workbook
    try:
        # A file object, not the path: openpyxl judges a path by its extension (.part here).
        book = openpyxl.load_workbook(handle, read_only=True, data_only=True)
    except (InvalidFileException, zipfile.BadZipFile, KeyError, OSError) as exc:
        handle.close()
        raise FileFormatError(f"The XLSX file cannot be read: {exc}") from None
    try:
        if sheet is not None and sheet not in book.sheetnames:
            raise FileFormatError(f"The workbook has no sheet {sheet!r}; its sheets: "
                                  f"{', '.join(book.sheetnames)}")
        rows = (book[sheet] if sheet is not None else book.worksheets[0]).iter_rows(
            values_only=True)
        target = f"{part}.csv"
        with open(target, "w", newline="", encoding="utf-8") as out:
            writer = csv.writer(out)
            for row in rows:
                writer.writerow(["" if v is None else v for v in row])
        return target
    finally:
        book.close()
        handle.close()


def publish(converted: Converted, target_key: str) -> None:
    """Move a converted file into place: a rename, so that a reader opens the old file or
    the new one, never half of one."""
    os.replace(converted.part, stored_path(target_key))


def remove(name_key: str) -> None:
    discard(stored_path(name_key))


def _converter() -> Any:
    # DuckDB loads on the first upload (a worker that never converts never pays for it).
    # A connection of its own: the SQL here is Quarry's (reading one upload), never a
    # caller's. One thread and 96 MiB keep a worker's growth during a 1 GB upload under
    # ~100 MiB (measured: 2 threads grew it by 150 MiB, for little time saved: the CSV
    # reader and the Parquet writer stream).
    import duckdb

    return duckdb.connect(":memory:", config={
        "threads": 1, "memory_limit": "96MiB", "preserve_insertion_order": True,
        "autoinstall_known_extensions": False, "autoload_known_extensions": False})


def _quoted(path: str) -> str:
    return path.replace("'", "''")


def _reader(conn: Any, source: str, kind: str) -> str:
    path = _quoted(source)
    if kind == "parquet":
        return f"read_parquet('{path}')"
    if kind == "json":
        return f"read_json('{path}', format='auto')"
    delim = "\\t" if kind == "tsv" else _delimiter(source)
    options = (f"delim=E'{delim}', header=true, skip=0, strict_mode=true, "
               "null_padding=false") if delim == "\\t" else \
        (f"delim='{delim}', header=true, skip=0, strict_mode=true, null_padding=false")
    encoding = _encoding(source)
    if encoding != "utf-8":
        options += f", encoding='{encoding}'"
    return f"read_csv('{path}', {options})"


def _delimiter(source: str) -> str:
    """The delimiter the header line uses most (DuckDB's sniffer, given a free hand,
    would rather read a ragged file as one column than say where it is ragged)."""
    with open(source, "rb") as handle:
        header = handle.readline(65536)
    counts = {d: header.count(d.encode()) for d in (",", "\t", ";", "|")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def _encoding(source: str) -> str:
    """utf-8 when the first MiB decodes as such, else latin-1 (any byte is latin-1)."""
    with open(source, "rb") as handle:
        head = handle.read(1 << 20)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        # Not merely a character cut at the end of the first MiB.
        if len(head) < (1 << 20) or exc.start < len(head) - 4:
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
    delim = "\t" if kind == "tsv" else _delimiter(source)
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
