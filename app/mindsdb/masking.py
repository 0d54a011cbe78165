"""A statement's text as Quarry keeps and shows it: every secret it carries masked.

The audit log, the statement history, the running statements, the logs and the error
messages see this text, never the caller's. The statement is read by the MindsDB parser and
the values under secret names (``rules.secrets.is_secret_key``) in its settings (the
``PARAMETERS`` of ``CREATE``/``ALTER DATABASE``, the ``USING`` of an agent, a model, an
engine …) are replaced by the mask; the tree is then written back as text. A statement the
parser cannot read is masked by the lexical rule (``rules.secrets.mask_text_lexically``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from mindsdb_sql_parser.ast import Constant
from mindsdb_sql_parser.ast.base import ASTNode

from ..rules.secrets import MASK, is_secret_key, mask_text_lexically, may_name_secret, scrub
from .parser import NotParsed, parse_sql_cached


@dataclass(frozen=True)
class MaskedStatement:
    """The masked text, and the secret values it held (to scrub from messages about it)."""

    text: str
    secrets: list[str] = field(default_factory=list)

    def scrub(self, message: str) -> str:
        # Values of one or two characters are left alone: replacing every "a" in a message
        # would garble it and hide nothing worth hiding.
        return scrub(message, [s for s in self.secrets if len(s) > 2 and s != MASK])


def mask_statement(query: str) -> MaskedStatement:
    """``query`` with its secrets masked (itself when it names no secret)."""
    if not may_name_secret(query):  # most statements: no parse, the text as it came
        return MaskedStatement(query)
    try:
        tree = parse_sql_cached(query)
    except NotParsed:
        return MaskedStatement(*mask_text_lexically(query))
    secrets: list[str] = []
    _mask_tree(tree, secrets, set())
    if not secrets:
        return MaskedStatement(query)
    try:
        text = tree.to_string()
    except Exception:  # noqa: BLE001 - a tree the parser's own writer cannot write back
        return MaskedStatement(*mask_text_lexically(query))
    # The writer may keep a value the tree holds out of its dicts (e.g. ``SET password =``).
    text, more = mask_text_lexically(text)
    return MaskedStatement(text, secrets + more)


def _mask_tree(node: Any, secrets: list[str], seen: set[int]) -> None:
    """Mask, in place, the values under secret names of every dict in the tree."""
    if id(node) in seen:
        return
    seen.add(id(node))
    if isinstance(node, dict):
        for key, value in node.items():
            if value is not None and is_secret_key(str(key)):
                _collect(value, secrets)
                node[key] = Constant(MASK) if isinstance(value, Constant) else MASK
            else:
                _mask_tree(value, secrets, seen)
    elif isinstance(node, list | tuple):
        for item in node:
            _mask_tree(item, secrets, seen)
    elif isinstance(node, ASTNode):
        for value in vars(node).values():
            _mask_tree(value, secrets, seen)


def _collect(value: Any, secrets: list[str]) -> None:
    if isinstance(value, dict):
        for item in value.values():
            _collect(item, secrets)
    elif isinstance(value, list | tuple):
        for item in value:
            _collect(item, secrets)
    elif value is not None:
        secrets.append(str(value.value if isinstance(value, Constant) else value))
