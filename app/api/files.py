"""Uploaded files: /api/files (mindsdb_sdk's upload_file), queried as files.<name>."""

import os
from typing import Any

from flask import current_app, jsonify, request
from werkzeug.exceptions import ClientDisconnected, RequestEntityTooLarge
from werkzeug.formparser import FormDataParser

from ..errors import BadRequest, PayloadTooLarge
from ..schemas.files import FileArgs, FileOut
from ..services import files as service
from .base import Blueprint

blp = Blueprint("files", __name__, url_prefix="/api/files",
                description="Uploaded files: tables of the data source files")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, FileOut(many=True))
def list_files():
    """List uploaded files."""
    return service.list_files()


# <file_name:…> (a path): a name such as ../x or a/b must reach the view, which refuses it
# (400), rather than fall through to another route.
@blp.route("/<file_name:name>", methods=["PUT"])
@blp.arguments(FileArgs, location="query")
@blp.response(200, FileOut)
@blp.problems(403, 409, 413, 422)
def upload_file(args, name):
    """Upload a file (multipart/form-data, part ``file``) as the table files.<name>."""
    return service.upload_file(name, lambda: _read_upload(name, args))


@blp.route("/<file_name:name>", methods=["DELETE"])
@blp.response(200)
@blp.doc_response(200, {"type": "string", "enum": [""],
                        "description": "An empty string, as MindsDB answers"})
@blp.problems(403, 404)
def delete_file(name):
    """Delete an uploaded file."""
    service.delete_file(name)
    return jsonify("")


# Largest form field held in memory (the file part is not: it goes to disk). Werkzeug also
# checks its parse buffer against it, which holds one 64 KiB read and a bit more.
_FIELD_BYTES = 1024 * 1024


def _too_large(limit: int) -> PayloadTooLarge:
    return PayloadTooLarge(f"The file is larger than the limit of {limit} bytes "
                           "(QUARRY_FILES_MAX_BYTES)")


def _read_upload(name: str, args: dict[str, Any]) -> service.Upload:
    """The form, with its file part written straight into the files folder as it arrives
    (never held in memory), and a CSV or TSV part into the converter at the same time."""
    limit = current_app.config["FILES_MAX_BYTES"]
    if not (request.mimetype or "").startswith("multipart/form-data"):
        raise BadRequest("Send the file as multipart/form-data with a part named 'file'")
    parts: list[Any] = []

    def target(*_: Any, filename: str | None = None, **__: Any) -> Any:
        handle = service.upload_target(name, filename, args.get("header"))
        parts.append(handle)
        return handle

    # The form around the file part is small: a body larger than the file limit plus a
    # little is refused as it arrives, before it is all written.
    request.max_content_length = limit + 64 * 1024
    parser = FormDataParser(stream_factory=target, max_content_length=limit + 64 * 1024,
                            max_form_memory_size=_FIELD_BYTES)
    try:
        _, form, files = parser.parse(request.stream, request.mimetype,
                                      request.content_length, request.mimetype_params)
    except BaseException as exc:
        # Too large, or cut off (the client stopped sending): nothing of it stays.
        for handle in parts:
            handle.cancel()
            service.discard(handle.name)
        if isinstance(exc, RequestEntityTooLarge):
            raise _too_large(limit) from None
        if isinstance(exc, ClientDisconnected):
            raise BadRequest("The upload ended before the body did (the client stopped "
                             "sending it): nothing was stored") from None
        raise
    stored = files.get("file")
    for handle in parts:
        handle.close()
        if stored is None or handle is not stored.stream:
            handle.cancel()
            service.discard(handle.name)
    if stored is not None and os.path.getsize(stored.stream.name) > limit:
        stored.stream.cancel()
        service.discard(stored.stream.name)
        raise _too_large(limit)
    return service.Upload(
        path=stored.stream.name if stored is not None else None,
        source_type=(form.get("source_type") or "file").lower(),
        source=form.get("source"),
        original_name=form.get("original_file_name") or (stored.filename if stored else None),
        sheet=args.get("sheet"), overwrite=args["overwrite"], header=args.get("header"),
        streamed=stored.stream if stored is not None else None)
