"""How a value of a parsed spec reads in a message, in YAML's words rather than Python's."""

from __future__ import annotations

from typing import Any


def kind_name(value: Any) -> str:
    """``a list of 3``, ``an empty mapping``, ``nothing (null)``, ``true``, ``'text'``, ``12``. A loaded spec holds
    only these kinds: the reader keeps dates as text and refuses sets, ordered maps and binary data."""
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, list):      # the length: a list of the wrong length is the usual slip
        return f"a list of {len(value)}" if value else "an empty list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def key_text(node: Any, key: Any) -> str:
    """Mapping `node`'s `key` as a field path shows it: as the spec wrote it (``yes``, ``~``, ``0x10``), which YAML
    reads as true, null or 16 and Python would print as True, None, 16; a key of a mapping built in Python (no
    text kept) as its YAML value (``true``, ``null``)."""
    if isinstance(key, str):
        return key
    written = getattr(node, "key_texts", {}).get(key)
    if written:
        return written
    if key is None:
        return "null"
    if isinstance(key, bool):
        return "true" if key else "false"
    return str(key)
