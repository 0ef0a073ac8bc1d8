"""One line of plain text on a console: what every command prints outside its tables.

Kept apart from `tables` (which imports the spec and results layers) so that
the command line can print before it has imported them.
"""

from __future__ import annotations

from rich.console import Console
from rich.text import Text


def say(console: Console, text: str, style: str | None = None) -> None:
    """Print a line of plain text: no markup, no highlighting, and no hard wrap (a pipe gets it whole)."""
    console.print(Text(text, style=style or ""), soft_wrap=True, highlight=False)
