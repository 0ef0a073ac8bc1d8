"""Text read from a results file, made safe to print: its names and messages reach a terminal as the characters
they are made of, never as commands to it.

A results file may come from anywhere (a colleague, a CI artifact, another tool), and a string in it can hold an
escape sequence that clears or recolours a terminal or sets its title, or a newline that forges a row of a table.
Every table, note and warning that shows such text passes it through `printable`; CSV and JSON keep it as it is
(their readers are programs, and their quoting already keeps a row a row).
"""

from __future__ import annotations

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
