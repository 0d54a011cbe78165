"""Uploaded files (``files.<name>``): upload, list, delete, and the rules they follow.

- names follow the naming rule, checked before anything touches the file system;
- a new name is unique in the store (a unique key), so two racing uploads cannot both win;
- a malformed file is refused (422) with nothing stored; a URL source only from an allowed
  host (fetching URLs for callers is a server-side request forgery risk);
- uploading and deleting are an admin's, as for other data sources; reading needs the
  right to query the data source ``files``;
- every upload and delete is in the audit log;
- ``CREATE [OR REPLACE] TABLE files.<name> (SELECT …)`` stores the answer of a query as a
  file (a snapshot), under the same rules as an upload; the query is read with the
  caller's rights, through the one read-only data path.
"""

from __future__ import annotations

import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from flask import Flask, current_app
from sqlalchemy import delete, select

from ..errors import FileExists, FileNotFound, PayloadTooLarge, Unprocessable
from ..extensions import db
from ..federation import run as federation
from ..rules.names import lookup_key, name_key, validate_name
from ..sql import files as storage
from ..sql.errors import SqlError
from ..store import UploadedFile
from . import access, audit
from . import sqlviews as view_service
from .common import commit, delete_or_gone


@dataclass
class Upload:
    """What the request sent: the path its file part was streamed to, and its fields."""

    path: str | None
    source_type: str = "file"
    source: str | None = None          # the URL when source_type is url
    original_name: str | None = None
    sheet: str | None = None
    overwrite: bool = False
    header: bool | None = None         # whether a CSV's first row names its columns
    # The file part's conversion begun as it arrived (a CSV or TSV file), if it was.
    streamed: storage.StreamedUpload | None = None


def check_name(name: str) -> str:
    """The file's name, checked before a byte of the upload is stored."""
    return validate_name("file", name)


def upload_target(name: str, filename: str | None, header: bool | None
                  ) -> storage.StreamedUpload:
    """Where a file part of an upload named ``name`` is written as it arrives (and, for a
    CSV or TSV file, converted at once)."""
    return storage.StreamedUpload(name_key(name), filename, header, _limits())


def _limits() -> storage.Limits:
    config = current_app.config
    return storage.Limits(max_bytes=config["FILES_MAX_BYTES"],
                          max_depth=config["MAX_JSON_DEPTH"],
                          timeout_s=config["FILES_TIMEOUT_S"])


def remove_stale_parts(app: Flask) -> None:
    """At start: the parts of uploads that a process which died left behind go."""
    storage.remove_stale_parts(app)


def discard(path: str | None) -> None:
    storage.discard(path)


def upload_file(name: str, read: Callable[[], Upload]) -> dict[str, Any]:
    """Store the upload ``read()`` reads as the table ``files.<name>``; its listing entry.

    The name and the caller's rights are checked before ``read`` takes a byte of the body.
    """
    check_name(name)
    access.require_admin("upload files")
    upload = read()
    try:
        return _store(name, upload)
    finally:
        if upload.streamed is not None:
            upload.streamed.cancel()
        storage.discard(upload.path)


def snapshot_query(name: str, query: str, context: str | None, *,
                   overwrite: bool) -> dict[str, Any]:
    """Store the rows of ``query`` (a SELECT on data sources, files or views, read with the
    caller's rights) as the table ``files.<name>``; its listing entry. ``context``: the
    database bare table names are in."""
    check_name(name)
    access.require_admin("upload files")
    registry = access.queryable_sources()
    source = context if context is not None and registry.get(context) is not None else None
    expanded = view_service.expand(query, None if source else context, registry) or query
    try:
        columns, records = federation.read_rows(
            expanded, registry, source, max_rows=current_app.config["TRAINING_MAX_ROWS"],
            timeout_s=current_app.config["SQL_TIMEOUT_S"])
    except SqlError as exc:
        raise Unprocessable(f"The rows of the query cannot be read: {exc.message}",
                            title="Invalid query") from None
    if len({c.lower() for c in columns}) != len(columns):
        raise Unprocessable(f"The query answers two columns of one name ({', '.join(columns)}):"
                            " name each column apart (AS …)", title="Invalid query")
    handle = storage.upload_target()
    try:
        with handle:
            storage.write_rows(handle, list(columns), records)
        return _store(name, Upload(path=handle.name, original_name=f"{name}.parquet",
                                   overwrite=overwrite))
    finally:
        storage.discard(handle.name)


def _store(name: str, upload: Upload) -> dict[str, Any]:
    key = name_key(name)
    fetched = None
    try:
        if upload.source_type == "url":
            fetched = _fetch_url(upload.source)
            path = fetched
        elif upload.source_type in ("file", "", None):
            path = upload.path
        else:
            raise Unprocessable(f"Unknown source_type {upload.source_type!r}: 'file' or 'url'")
        if path is None:
            raise Unprocessable("The request has no file part named 'file'")
        existing = _find(key)
        if existing is not None and not upload.overwrite:
            raise FileExists(name)  # before converting: nothing to undo
        converted = _convert(path, upload, key)
    finally:
        storage.discard(fetched)
    try:
        before = _audited(existing) if existing is not None else None
        row = existing or UploadedFile(name=name, name_key=key)
        row.name, row.row_count, row.columns = name, converted.row_count, converted.columns
        row.size, row.original_name = converted.size, upload.original_name
        if existing is None:
            db.session.add(row)
        audit.record_change("file", "replace" if existing else "upload", name, before,
                            _audited(row))
        commit(lambda: FileExists(name))
        storage.publish(converted, key)  # after the commit: a lost race leaves no bytes
    finally:
        storage.discard(converted.part)
    return _entry(row)


def _convert(path: str, upload: Upload, key: str) -> storage.Converted:
    limits = _limits()
    try:
        kind = storage.sniff_format(path, upload.original_name, upload.sheet)
        if upload.header is not None and kind not in ("csv", "tsv", "xlsx"):
            raise Unprocessable(f"header applies to CSV, TSV and XLSX files; this is a "
                                f"{kind.capitalize()} file, which names its columns itself")
        streamed = upload.streamed
        if streamed is not None and path == streamed.name and streamed.kind == kind:
            try:
                return streamed.result()
            except storage.FileFormatError:
                pass  # told from the file on disk below, in the converter's own words
        return storage.convert(path, kind, key, limits, upload.sheet, upload.header)
    except storage.NestedTooDeep as exc:
        raise Unprocessable(str(exc), title="Nested too deep") from None
    except storage.FileFormatError as exc:
        raise Unprocessable(str(exc), title="Malformed file") from None
    except storage.ConversionTooLarge as exc:
        raise PayloadTooLarge(str(exc)) from None


def list_files() -> list[dict[str, Any]]:
    """The uploaded files; none for a caller who may not query the data source files
    (a source one may not query does not exist for one)."""
    if not access.may_query(storage.FILES_SOURCE):
        return []
    rows = db.session.scalars(select(UploadedFile).order_by(UploadedFile.name_key))
    return [_entry(row) for row in rows]


def file_tables() -> list[dict[str, Any]]:
    """The files as tables with their columns and types (the console's completion)."""
    return [{"name": f["name"],
             "columns": [{"name": c, "type": t}
                         for c, t in storage.file_schema(name_key(f["name"]))]}
            for f in list_files()]


def delete_file(name: str) -> None:
    access.require_admin("delete files")
    key = lookup_key(name)
    row = _find(key) if key else None
    if row is None:
        raise FileNotFound(name)
    audit.record_change("file", "delete", row.name, _audited(row), None)
    delete_or_gone(delete(UploadedFile).where(UploadedFile.id == row.id),
                   lambda: FileNotFound(name))
    storage.remove(key)


def _find(key: str) -> UploadedFile | None:
    return db.session.scalar(select(UploadedFile).where(UploadedFile.name_key == key))


def _entry(row: UploadedFile) -> dict[str, Any]:
    return {"name": row.name, "row_count": row.row_count, "columns": list(row.columns),
            "size": row.size, "created_at": row.created_at}


def _audited(row: UploadedFile) -> dict[str, Any]:
    return {"row_count": row.row_count, "columns": list(row.columns), "size": row.size,
            "original_name": row.original_name}


def _fetch_url(url: str | None) -> str:
    """Download ``url`` into the files folder, only from a host of FILES_URL_ALLOW."""
    allowed = {h.strip().lower() for h in
               (current_app.config.get("FILES_URL_ALLOW") or "").split(",") if h.strip()}
    parts = urlsplit(url or "")
    host = (parts.hostname or "").lower()
    if parts.scheme not in ("http", "https") or not host:
        raise Unprocessable(f"source must be an http(s) URL, not {url!r}")
    if host not in allowed:
        raise Unprocessable(f"Uploads from URLs are allowed only from the hosts of "
                            f"QUARRY_FILES_URL_ALLOW; {host!r} is not one of them",
                            title="URL not allowed")
    limit = current_app.config["FILES_MAX_BYTES"]
    target = storage.upload_target()
    try:
        with target, urllib.request.urlopen(url, timeout=30) as answer:  # noqa: S310
            copied = 0
            while chunk := answer.read(1 << 20):
                copied += len(chunk)
                if copied > limit:
                    raise PayloadTooLarge(f"The file at {url} is larger than "
                                          f"QUARRY_FILES_MAX_BYTES ({limit} bytes)")
                target.write(chunk)
    except BaseException:
        storage.discard(target.name)
        raise
    return target.name


__all__ = ["Upload", "check_name", "delete_file", "discard", "list_files",
           "remove_stale_parts", "upload_file", "upload_target"]
