"""How a value of a parsed spec reads in a message, in YAML's words rather than Python's."""

from __future__ import annotations

import datetime
from typing import Any


def kind_name(value: Any) -> str:
    """``a list of 3``, ``an empty mapping``, ``nothing (null)``, ``true``, ``a set (!!set)``, ``'text'``, ``12``."""
    if isinstance(value, dict):
        return "a mapping" if value else "an empty mapping"
    if isinstance(value, (list, tuple)):       # the length: a list of the wrong length is the usual slip
        return f"a list of {len(value)}" if value else "an empty list"
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (datetime.date, datetime.datetime)):   # YAML reads 2024-01-01 as a date
        return f"a date ({value.isoformat()})"
    if isinstance(value, (set, frozenset)):
        return "a set (!!set)"
    if isinstance(value, (bytes, bytearray)):
        return "binary data (!!binary)"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
