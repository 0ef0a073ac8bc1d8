"""C++ source text as a reader that does not compile it sees it: comments left out, literals kept. Imports nothing
from the rest of driver-gemm, so that the spec reader (a hint that names a declaration) and the compiler's checks
read a source alike."""

from __future__ import annotations

import re

# A comment, or a literal that may hold what looks like one ("http://"), read left to right in one pass: an unclosed
# /* runs to the end, as the compiler reads it, so that no later /* is tried against the rest of the text again.
_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                                 re.DOTALL)


def without_comments(text: str) -> str:
    """`text` with each comment read as a space, its literals kept."""
    return _COMMENT_OR_LITERAL.sub(lambda found: found.group(0) if found.group(0)[0] in "\"'" else " ", text)
