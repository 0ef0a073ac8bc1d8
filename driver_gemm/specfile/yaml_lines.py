"""Read spec bytes into Python values that remember their line numbers, within bounds.

`read_document` gives mappings and lists that know the line of every entry (``yaml.safe_load``'s
semantics otherwise) and first refuses anything that could exhaust the machine: oversized files,
non-UTF-8 or NUL bytes, deep nesting, aliases that expand too far or contain themselves, absurdly
long integers (bounds in `driver_gemm.specfile.limits`).
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from ..errors import SpecError
from .limits import MAX_NUMBER_DIGITS, MAX_SPEC_BYTES, MAX_YAML_DEPTH, MAX_YAML_NODES


class LineNode:
    """Mixin giving a loaded mapping or sequence its own line and its entries' lines."""

    line: int
    entry_lines: dict
    key_texts: dict     # a key YAML read as no text (yes, ~, 0x10) -> the text it was written as


# A whole number with a leading zero and more digits: YAML 1.1's octal (0512), or text where a digit is 8 or 9.
_LEADING_ZERO = re.compile(r"[-+]?0[0-9_]*[0-9][0-9_]*")


class OversizedInteger(str):
    """The text of a YAML integer too long to convert; the field that reads it refuses it by name."""


class LineDict(dict, LineNode):
    pass


class LineList(list, LineNode):
    pass


# What ends a line to YAML (and so to every message that quotes PyYAML's marks): CR LF, a lone CR or LF, NEL,
# and Unicode's line and paragraph separators.
_LINE_BREAK = re.compile("\r\n|[\r\n\x85\u2028\u2029]")
_BYTE_LINE_BREAK = re.compile(rb"\r\n|[\r\n]|\xc2\x85|\xe2\x80[\xa8\xa9]")


def _line_of(text: str, offset: int) -> int:
    """The line of `text` at `offset`, counted as YAML counts lines."""
    return sum(1 for _ in _LINE_BREAK.finditer(text, 0, offset)) + 1


def _byte_line_of(data: bytes, offset: int) -> int:
    """The line of the UTF-8 `data` at byte `offset`, counted as YAML counts lines."""
    return sum(1 for _ in _BYTE_LINE_BREAK.finditer(data, 0, offset)) + 1


class _BoundedLineLoader(yaml.SafeLoader):
    """A SafeLoader that counts while composing and records lines while constructing."""

    def __init__(self, stream, file: str):
        super().__init__(stream)
        self.file = file
        self._depth = 0
        self._expanded_size: dict[int, int] = {}   # id(node) -> nodes it stands for, aliases expanded
        self._aliases = 0                           # aliases composed so far: whether they are to blame for a size
        # Nodes composed so far, each alias counted as the nodes it stands for: checked as each node comes, so that
        # a document over the bound is refused at its first node too many, never after all of them are built.
        self._composed = 0

    def _refuse(self, message: str, mark, hint: str | None = None) -> SpecError:
        where = f"{self.file}:{mark.line + 1}" if mark is not None else self.file
        return SpecError(message, where=where, hint=hint)

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            mark = self.peek_event().start_mark
            self._aliases += 1
            node = super().compose_node(parent, index)
            if id(node) not in self._expanded_size:
                raise self._refuse("an alias refers to a node that contains it (a recursive alias)", mark)
            self._count(self._expanded_size[id(node)], mark)
            return node
        mark = self.peek_event().start_mark
        self._count(1, mark)
        self._depth += 1
        if self._depth > MAX_YAML_DEPTH:
            raise self._refuse(f"nested more than {MAX_YAML_DEPTH} levels deep", mark,
                               hint="a spec needs about 6 levels; MAX_YAML_DEPTH is the limit")
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        size = 1   # what an alias of this node will count (the running count is bounded, so this is too)
        if isinstance(node, yaml.SequenceNode):
            size += sum(self._expanded_size[id(child)] for child in node.value)
        elif isinstance(node, yaml.MappingNode):
            size += sum(self._expanded_size[id(key)] + self._expanded_size[id(value)] for key, value in node.value)
        self._expanded_size[id(node)] = size
        return node

    def _count(self, nodes: int, mark) -> None:
        self._composed += nodes
        if self._composed > MAX_YAML_NODES and self._aliases:
            raise self._refuse(f"the document expands to more than {MAX_YAML_NODES:,} YAML nodes "
                               "(counting every use of an alias)", mark,
                               hint="aliases that repeat aliases multiply; write the values out instead")
        if self._composed > MAX_YAML_NODES:
            raise self._refuse_too_many_nodes(mark)

    def _refuse_too_many_nodes(self, mark) -> SpecError:
        return self._refuse(f"the document holds more than {MAX_YAML_NODES:,} YAML nodes (MAX_YAML_NODES)", mark,
                            hint="write many shapes as a set of ranges, such as "
                                 "{M: {from: 64, to: 4096, times: 2}, N: 4096, K: 4096}")

    def refuse_many_nodes_early(self, text: str) -> None:
        """Refuse a document of more than `MAX_YAML_NODES` nodes written out, counted by libyaml's parser.

        The pure-Python composer below counts the same nodes and refuses at the same one, but reaching it
        through a document of the largest allowed size takes seconds; libyaml's events take a tenth of one.
        Anything this count cannot judge alone is left to the composer: aliases (what they stand for is counted
        there), nesting past `MAX_YAML_DEPTH` (refused there, and first), and text libyaml cannot parse (whose
        message is the composer's to give). Text that libyaml reads and PyYAML's scanner refuses (a tab between flow
        items) and that holds too many nodes gets this count's refusal, both being true. Without libyaml, the
        composer alone counts."""
        if not getattr(yaml, "__with_libyaml__", False):
            return
        nodes = depth = 0
        try:
            for event in yaml.parse(text, Loader=yaml.CSafeLoader):
                if isinstance(event, (yaml.AliasEvent, yaml.DocumentEndEvent)):
                    return
                if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                    depth -= 1
                    continue
                if not isinstance(event, yaml.NodeEvent):
                    continue
                nodes += 1
                if nodes > MAX_YAML_NODES:
                    raise self._refuse_too_many_nodes(event.start_mark)
                if isinstance(event, yaml.CollectionStartEvent):
                    depth += 1
                    if depth > MAX_YAML_DEPTH:
                        return
        except yaml.YAMLError:
            return

    def construct_yaml_int(self, node):
        # Python refuses to convert integers of over 4300 digits; none of over 40 fits any field.
        if len(node.value) > MAX_NUMBER_DIGITS:
            return OversizedInteger(node.value)
        if ":" in node.value:      # YAML 1.1's base 60 (1:2:3 is 3723): a typo, kept as the text it is
            return self.construct_scalar(node)
        self._refuse_leading_zero(node)
        return super().construct_yaml_int(node)

    def construct_yaml_str(self, node):
        if node.style is None:     # 0128 is text to YAML 1.1 (8 is no octal digit): the same slip as 0512
            self._refuse_leading_zero(node)
        return super().construct_yaml_str(node)

    def _refuse_leading_zero(self, node) -> None:
        """A whole number written with a leading zero (0512, zero-padded to line up a table): YAML 1.1 reads it as
        octal (0512 is 330), or as text where a digit is 8 or 9, and neither is what it looks like."""
        if _LEADING_ZERO.fullmatch(node.value):
            digits = node.value.lstrip("+-").replace("_", "")
            octal = f" as octal, {int(digits, 8):,}" if set(digits) <= set("01234567") else " as text"
            raise self._refuse(f"{node.value} is written with a leading zero, which YAML 1.1 reads{octal}",
                               node.start_mark, hint=f"write {int(node.value.replace('_', ''))} without the zeros, "
                                                     "or quote it where text is meant")

    def construct_yaml_float(self, node):
        if ":" in node.value:      # base 60 again (1:30.5 is 90.5)
            return self.construct_scalar(node)
        return super().construct_yaml_float(node)

    def construct_yaml_timestamp_as_text(self, node):
        # A spec reads no dates: 2024-01-01 where a number belongs is a typo, refused by the field that reads it
        # (with its line), and out-of-range dates (2024-13-45) must not fail inside the constructor.
        return self.construct_scalar(node)

    def refuse_tag(self, node):
        tag = node.tag.rsplit(":", 1)[-1]
        raise self._refuse(f"!!{tag} is not a kind of value a spec holds", node.start_mark,
                           hint="a spec holds mappings, lists, text, numbers, true/false and null")

    def construct_object(self, node, deep=False):
        # A tag that forces a kind on a value that is not one (!!bool maybe, !!int '', !!seq {a: 1}) fails inside
        # PyYAML's constructors with Python's own errors: refused here with the node's line instead.
        try:
            return super().construct_object(node, deep)
        except (SpecError, yaml.YAMLError, RecursionError):
            raise
        except (KeyError, IndexError, AttributeError, TypeError, ValueError, OverflowError):
            tag = node.tag.rsplit(":", 1)[-1]
            shown = f" {node.value!r:.60}" if isinstance(node, yaml.ScalarNode) else (
                " (a list)" if isinstance(node, yaml.SequenceNode) else " (a mapping)")
            kind = {"bool": "true or false", "int": "a whole number", "float": "a number", "null": "null",
                    "str": "text"}.get(tag, f"a {tag}")
            raise self._refuse(f"the value{shown} is tagged !!{tag}, but is not {kind}", node.start_mark,
                               hint="leave the tag out: a spec's fields read plain numbers, text, lists and "
                                    "mappings") from None

    def construct_mapping(self, node, deep=False):
        if not isinstance(node, yaml.MappingNode):
            raise self._refuse("the value is tagged !!map but is not a mapping", node.start_mark)
        # Keys merged in with <<: come first and may be overridden by the mapping's own; only its own may not repeat.
        own = sum(1 for key_node, _ in node.value if key_node.tag != "tag:yaml.org,2002:merge")
        self.flatten_mapping(node)
        merged = len(node.value) - own
        result = LineDict()
        result.line = node.start_mark.line + 1
        result.entry_lines = {}
        result.key_texts = {}
        own_keys: set = set()
        for index, (key_node, value_node) in enumerate(node.value):
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                raise self._refuse("a mapping key must be a name or a number, not a list or a mapping",
                                   key_node.start_mark)
            if index >= merged:
                if key in own_keys:
                    raise self._refuse(f"duplicate key {key!r}", key_node.start_mark)
                own_keys.add(key)
            result[key] = self.construct_object(value_node, deep=True)
            result.entry_lines[key] = key_node.start_mark.line + 1
            if not isinstance(key, str) and isinstance(key_node, yaml.ScalarNode):
                result.key_texts[key] = key_node.value
        return result

    def construct_sequence(self, node, deep=False):
        if not isinstance(node, yaml.SequenceNode):
            raise self._refuse("the value is tagged !!seq but is not a list", node.start_mark)
        result = LineList(self.construct_object(child, deep=True) for child in node.value)
        result.line = node.start_mark.line + 1
        result.entry_lines = {i: child.start_mark.line + 1 for i, child in enumerate(node.value)}
        result.key_texts = {}
        return result


_BoundedLineLoader.add_constructor("tag:yaml.org,2002:map", _BoundedLineLoader.construct_mapping)
_BoundedLineLoader.add_constructor("tag:yaml.org,2002:seq", _BoundedLineLoader.construct_sequence)
_BoundedLineLoader.add_constructor("tag:yaml.org,2002:int", _BoundedLineLoader.construct_yaml_int)
_BoundedLineLoader.add_constructor("tag:yaml.org,2002:str", _BoundedLineLoader.construct_yaml_str)
_BoundedLineLoader.add_constructor("tag:yaml.org,2002:float", _BoundedLineLoader.construct_yaml_float)
_BoundedLineLoader.add_constructor("tag:yaml.org,2002:timestamp", _BoundedLineLoader.construct_yaml_timestamp_as_text)
for _tag in ("set", "omap", "pairs", "binary"):
    _BoundedLineLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _BoundedLineLoader.refuse_tag)


def read_spec_bytes(path: Path) -> bytes:
    """The bytes of the spec file at `path`, refusing what is not a regular file or is over `MAX_SPEC_BYTES`."""
    try:
        os.fsencode(path)
    except UnicodeError:    # Path.is_file would answer False, and the spec be called missing
        raise SpecError(f"cannot read spec: its name has characters that this system's file-name encoding "
                        f"({sys.getfilesystemencoding()}, from the locale) cannot write", where=str(path),
                        hint="run under a UTF-8 locale (LC_ALL=C.UTF-8, or PYTHONUTF8=1), or give the file an "
                             "ASCII name") from None
    try:
        if not path.is_file():
            what = ("a folder" if path.is_dir() else
                    "a symbolic link to nothing (its target is missing, or a loop)" if path.is_symlink()
                    and not path.exists() else "missing" if not path.exists() else "not a regular file")
            raise SpecError(f"cannot read spec: {what}", where=str(path))
        with path.open("rb") as stream:
            data = stream.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"cannot read spec: {exc.strerror or exc}", where=str(path)) from None
    if len(data) > MAX_SPEC_BYTES:
        raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES:,} bytes (MAX_SPEC_BYTES)", where=str(path),
                        hint="a spec lists kernels and shapes; generate large sweeps with ranges and lists")
    return data


def decode_spec(data: bytes, file: str) -> str:
    """Strict UTF-8 text of `data`; a bad byte or a NUL byte is refused with its offset and line."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = _byte_line_of(data, exc.start)
        raise SpecError(f"not UTF-8 text: byte {data[exc.start]:#04x} at offset {exc.start} ({exc.reason})",
                        where=f"{file}:{line}", hint="a spec is a YAML text file in UTF-8") from None
    check_text(text, file)
    return text


def check_text(text: str, file: str) -> None:
    """Refuse text with NUL characters or longer than `MAX_SPEC_BYTES` once encoded."""
    if "\x00" in text:
        offset = text.index("\x00")
        raise SpecError(f"a NUL character at offset {offset}: this is not a text file",
                        where=f"{file}:{_line_of(text, offset)}", hint="a spec is a YAML text file in UTF-8")
    if len(text) > MAX_SPEC_BYTES or len(text.encode("utf-8", "surrogatepass")) > MAX_SPEC_BYTES:
        raise SpecError(f"the spec is larger than {MAX_SPEC_BYTES:,} bytes (MAX_SPEC_BYTES)", where=file)


def _yaml_problem(exc: yaml.MarkedYAMLError) -> str:
    """PyYAML's context and problem in one line, each with its line where they differ: its problem alone can be
    half a sentence ("second occurrence", "but found another document")."""
    def at(mark) -> str:
        return f" (line {mark.line + 1})" if mark is not None else ""

    context, problem = (exc.context or "").strip(), (exc.problem or "").strip()
    if not problem:
        return context or str(exc)
    if not context:
        return problem
    if exc.context_mark is None or exc.problem_mark is None or exc.context_mark.line == exc.problem_mark.line:
        return f"{context}, {problem}"
    return f"{context}{at(exc.context_mark)}, {problem}{at(exc.problem_mark)}"


def read_document(text: str, file: str) -> Any:
    """Parse YAML `text` into line-numbered values; every failure is a `SpecError` at `file:line`."""
    check_text(text, file)
    loader = None
    try:
        loader = _BoundedLineLoader(text, file)   # the reader checks every character here
        loader.refuse_many_nodes_early(text)
        return loader.get_single_data()
    except SpecError:
        raise
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"{file}:{mark.line + 1}" if mark else file
        raise SpecError(f"not valid YAML: {_yaml_problem(exc)}", where=where) from None
    except yaml.reader.ReaderError as exc:
        where = f"{file}:{_line_of(text, exc.position)}"
        raise SpecError(f"not valid YAML: character {exc.character!r} is not allowed in YAML text",
                        where=where) from None
    except yaml.YAMLError as exc:
        raise SpecError(f"not valid YAML: {exc}", where=file) from None
    except RecursionError:
        raise SpecError("nested too deeply to read", where=file,
                        hint=f"a spec needs about 6 levels; MAX_YAML_DEPTH is {MAX_YAML_DEPTH}") from None
    except (ValueError, OverflowError) as exc:   # a scalar the constructors cannot convert (a date out of range)
        raise SpecError(f"not valid YAML: {exc}", where=file) from None
    finally:
        if loader is not None:
            loader.dispose()
