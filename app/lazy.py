"""Modules imported when one of their names is first read (``on_first_use("pyarrow")``).

pyarrow (55 MiB, and pandas, which its first scalar or array loads) serves only Arrow and
CSV streams, uploaded files and federated statements: imported with the app, it sat in every
gunicorn worker (and its master) of a service that may never use it. Names are read per
batch, column or file, never per value, so the lookup costs nothing measurable.
"""

from __future__ import annotations

import importlib
from typing import Any


class on_first_use:  # noqa: N801 - used like the module it stands for
    """Stands for module ``name``; imports it when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)
