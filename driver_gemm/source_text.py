"""C++ source text as a reader that does not compile it sees it: comments left out, literals kept, and every
include directive however it is spelled (`includes_in`). Imports nothing from the rest of driver-gemm, so that the
spec reader (a hint that names a declaration), the scan of a kernel's headers and the compiler's messages read a
source alike."""

from __future__ import annotations

import bisect
import re

# A comment, or a literal that may hold what looks like one ("http://"), read left to right in one pass: an unclosed
# /* runs to the end, as the compiler reads it, so that no later /* is tried against the rest of the text again.
_COMMENT_OR_LITERAL = re.compile(r'//[^\n]*|/\*.*?(?:\*/|\Z)|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'',
                                 re.DOTALL)


def without_comments(text: str) -> str:
    """`text` with each comment read as a space, its literals kept."""
    return _COMMENT_OR_LITERAL.sub(lambda found: found.group(0) if found.group(0)[0] in "\"'" else " ", text)


_INCLUDE = re.compile(r'^[ \t]*(?:#|%:)[ \t]*(?:include|include_next|import)\b[ \t]*'
                      r'(?:"([^"\n]+)"|<([^>\n]+)>|(\S.*)?)', re.MULTILINE)


def directive_text(text: str) -> str:
    """`text` as the preprocessor's first phases leave it for its directives: trigraphs for # and \\ read as those
    characters, every backslash-newline spliced away, form feeds and vertical tabs read as spaces, so that no
    spelling of an include escapes the scan (a trigraph the compiler would not read makes the scan see more, never
    less)."""
    text = text.replace("??=", "#").replace("??/", "\\").replace("\f", " ").replace("\v", " ")
    return re.sub(r"\\[ \t]*\r?\n", "", text)


_NEWLINE = re.compile("\n")


def block_comments(text: str):
    """(start, end) of each ``/* ... */`` of `text`, as a non-greedy regular expression would find them, in one
    pass: the expression retries every later ``/*`` against the rest of the text, which takes minutes on a
    source with thousands of unclosed ones (in a line comment or a string)."""
    position = 0
    while True:
        start = text.find("/*", position)
        if start < 0:
            return
        end = text.find("*/", start + 2)
        if end < 0:   # no later /* has a */ after it either
            return
        yield start, end + 2
        position = end + 2


def includes_in(text: str, including: str):
    """(where, quoted, angled, other) of every include directive of `text`: read both as written and with each
    block comment read as the one space the preprocessor makes of it (``#/**/include``, or a comment spanning
    lines inside a directive), since a comment marker inside a string literal could hide a real directive from the
    second reading; a directive in a comment is then read too, which only ever refuses more."""
    spliced = directive_text(text)
    pieces, marks, kept, removed = [], [], 0, 0   # marks: (position in the reading, newlines taken out before it)
    last = 0
    for start, end in block_comments(spliced):
        pieces.append(spliced[last:start] + " ")
        kept += start - last + 1
        removed += spliced.count("\n", start, end)
        marks.append((kept, removed))
        last = end
    pieces.append(spliced[last:])
    seen = set()
    for reading, shifts in ((spliced, []), ("".join(pieces), marks)):
        newlines = [found.start() for found in _NEWLINE.finditer(reading)]   # a line by bisection, not a count
        for match in _INCLUDE.finditer(reading):
            before = bisect.bisect_right(shifts, (match.start(), float("inf"))) - 1
            line = bisect.bisect_left(newlines, match.start()) + 1 + (shifts[before][1] if before >= 0 else 0)
            if (line, match.groups()) in seen:
                continue
            seen.add((line, match.groups()))
            yield (f"{including}:{line}", *match.groups())
