"""The app's JSON provider: orjson for speed, the standard library where orjson cannot.

Encoding is most of the cost of a large answer (a list of 1 000 skills). orjson refuses
integers beyond 64 bits, which a client may well have stored in a skill's params; such a
document falls back to the standard encoder, so nothing a client stored fails to come back.
"""

from __future__ import annotations

import json
from typing import Any

import orjson
from flask.json.provider import DefaultJSONProvider


class JSONProvider(DefaultJSONProvider):
    sort_keys = False
    ensure_ascii = False

    def dumps(self, obj: Any, **kwargs: Any) -> str:
        if not kwargs:
            try:
                return orjson.dumps(obj, default=self.default).decode()
            except (TypeError, orjson.JSONEncodeError):
                pass  # e.g. an integer beyond 64 bits: the standard encoder handles it
        kwargs.setdefault("default", self.default)
        kwargs.setdefault("ensure_ascii", False)
        return json.dumps(obj, **kwargs)

    def response(self, *args: Any, **kwargs: Any):
        obj = self._prepare_response_obj(args, kwargs)
        return self._app.response_class(f"{self.dumps(obj)}\n", mimetype=self.mimetype)
