"""The size limit of a skill's or an agent's ``params``: settings, not documents."""

from __future__ import annotations

import json
from typing import Any

from ..errors import PayloadTooLarge


def params_size(params: Any) -> int:
    """Bytes of ``params`` as compact JSON in UTF-8 — how it is stored and sent back, and a
    measure that does not depend on how the client spaced its body."""
    return len(json.dumps(params, ensure_ascii=False, separators=(",", ":"),
                          default=str).encode())


def require_params_within(params: Any, limit: int, what: str) -> None:
    """413 when ``params`` is larger than ``limit`` bytes. Every create and update checks the
    params it would store (an update's merge too), so repeated updates cannot grow them."""
    size = params_size(params)
    if size > limit:
        raise PayloadTooLarge(f"The params of {what} are {size} bytes of JSON, more than the "
                              f"limit of {limit} bytes (QUARRY_PARAMS_MAX_BYTES)",
                              title="Params too large", limit=limit, size=size)
