"""Text read from a results file, made safe to print: its names and messages reach a terminal as the characters
they are made of, never as commands to it.

A results file may come from anywhere (a colleague, a CI artifact, another tool), and a string in it can hold an
escape sequence that clears or recolours a terminal or sets its title, or a newline that forges a row of a table.
Every table, note and warning that shows such text passes it through `printable`; CSV and JSON keep it as it is
(their readers are programs, and their quoting already keeps a row a row).
"""

from __future__ import annotations

import os
import re

# C0 controls, DEL and C1 controls: what a terminal acts on rather than shows.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
_NAMED_CONTROLS = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str) -> str:
    """`text` with its control characters written as escapes (``\\x1b``, ``\\n``); `text` itself when it has
    none."""
    if _CONTROL.search(text) is None:
        return text
    return _CONTROL.sub(lambda found: _NAMED_CONTROLS.get(found.group(), f"\\x{ord(found.group()):02x}"), text)


def first_control(text: str) -> str | None:
    """The first control character of `text` (``\x1b``, a line break), or None where it has none."""
    found = _CONTROL.search(text)
    return None if found is None else found.group()


# The most of a text from elsewhere (a builder's exception, a line of a user's file) that a message quotes: enough to
# say what it is, never megabytes on stderr.
MOST_QUOTED_CHARS = 300


def shortened(text: str, most: int = MOST_QUOTED_CHARS) -> str:
    """`text` as a message quotes it: whole when it is short, else its first `most` characters and how many more
    there were."""
    if len(text) <= most:
        return text
    return f"{text[:most]}... ({len(text) - most:,} more characters)"


def path_text(path: str | os.PathLike) -> str:
    """`path` as a results file records it: its text, with any byte of its name that is not UTF-8 written as an
    escape (``caf\\xe9.yaml``). Python holds such a byte as half of a surrogate pair (``\\udce9``), which no
    UTF-8 output can take and `results.read` refuses; the file a run writes must read back."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")
