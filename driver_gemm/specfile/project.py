"""The project a spec belongs to: the tree its kernel sources, headers, fill files and host builders must stay in,
and the checked path of each such file a spec names."""

from __future__ import annotations

import sys
from pathlib import Path

from ..bundled import PACKAGE_DATA_DIR
from .fields import IDENTIFIER, Context, read_text
from .kinds import kind_name
from .limits import BUILDER_SUFFIXES, MAX_BUILDER_BYTES, PROJECT_MARKERS
from .model import HostBuilder


UNENCODABLE_HINT = "run under a UTF-8 locale (LC_ALL=C.UTF-8, or PYTHONUTF8=1), or give the file an ASCII name"


def unencodable(noun: str, shown: str) -> str:
    """Why a path the spec names cannot be looked up: this system's file-name encoding (from the locale: ASCII
    under a plain C or POSIX one without UTF-8 mode) has no bytes for some of its characters, so no file of that
    name can be asked for."""
    return (f"{noun} {shown} cannot be looked up: its name has characters that this system's file-name encoding "
            f"({sys.getfilesystemencoding()}, from the locale) cannot write")


def project_root(folder: Path) -> Path:
    """The nearest folder at or above `folder` that holds a project marker (``.git``, ``pyproject.toml``...),
    else `folder` itself: the tree relative kernel sources must stay in.

    The specs shipped inside an installed package count as one project with
    the kernels shipped beside them (their data folder).
    """
    folder = folder.resolve()
    shipped = PACKAGE_DATA_DIR.resolve()
    for candidate in (folder, *folder.parents):
        if candidate == shipped or any((candidate / marker).exists() for marker in PROJECT_MARKERS):
            return candidate
    return folder


def _outside_hint(root: Path) -> str:
    """What lets a file outside `root` in: a project marker where none was found, or the flag."""
    flag = "pass --allow-outside-sources (allow_outside_sources=True)"
    if root.resolve() == PACKAGE_DATA_DIR.resolve() or any((root / marker).exists() for marker in PROJECT_MARKERS):
        return f"keep the spec's files inside {root}, or {flag}"
    named = [f"`{marker}`" for marker in PROJECT_MARKERS]
    markers = ", ".join(named[:-1]) + " or " + named[-1]
    return (f"no folder above the spec holds a {markers} (which mark a project's root), so the project is the "
            f"spec's own folder: put a pyproject.toml (or make a git repository) in the folder that holds both the "
            f"specs and the kernels, or {flag}")


def project_file(context: Context, node: dict, key: str, field_path: str, noun: str, suffixes: tuple[str, ...],
                 limit: tuple[int, str], text: str | None = None, any_case: bool = False) -> Path:
    """The file ``node[key]`` names (or `text`, where the field holds more than a path), resolved against the
    spec's folder: printable, relative and inside the spec's project unless the user gave leave, ending in one of
    `suffixes` (in any case of letters with `any_case`: a prebuilt image's ``.CUBIN``, as the loader reads it), a
    regular file of at most ``limit[0]`` bytes (the limit's name ``limit[1]``). `noun` names it in every message
    ("kernel source")."""
    def suffix_of(path: Path) -> str:
        return path.suffix.lower() if any_case else path.suffix

    if text is None:
        text = read_text(context, node, key, field_path)
    if any(not character.isprintable() for character in text):   # a newline or a bell would garble every message
        raise context.error(f"a {noun} path is printable text, got {text!r}", node, key, field_path)
    written = Path(text)
    shown = text if len(text) <= 160 else f"{text[:120]}... ({len(text):,} characters)"   # a message stays readable
    if written.is_absolute() and not context.allow_outside_sources:
        what = "source" if noun == "kernel source" else noun   # "an absolute source path", "... builder file path"
        raise context.error(f"an absolute {what} path ({shown}) needs the user's leave", node, key, field_path,
                            hint="write it relative to the spec, or pass --allow-outside-sources "
                                 "(allow_outside_sources=True)")
    try:   # a symbolic link loop, a name too long, a folder that may not be searched: said at the field
        found = (context.base_dir / written).resolve()
        if not context.allow_outside_sources:
            root = project_root(context.base_dir)
            if not found.is_relative_to(root):
                raise context.error(f"{noun} {shown} leaves the spec's project ({root})", node, key,
                                    field_path, hint=_outside_hint(root))
        if suffix_of(written) not in suffixes:
            raise context.error(f"a {noun} ends in {', '.join(suffixes)}; got {shown}", node, key, field_path)
        if suffix_of(found) not in suffixes:   # a link to a file of another kind (a device, a script, a binary)
            raise context.error(f"{noun} {shown} is a link to {found}, which does not end in {', '.join(suffixes)}"
                                + ("" if found.is_file() or not found.exists() else ", and is not a regular file"),
                                node, key, field_path)
        if not found.exists():
            raise context.error(f"{noun} {found} does not exist", node, key, field_path)
        if not found.is_file():
            raise context.error(f"{noun} {found} is not a regular file", node, key, field_path)
        size = found.stat().st_size
    except RuntimeError:   # Path.resolve's symbolic link loop before Python 3.13
        raise context.error(f"{noun} {shown} is a symbolic link loop", node, key, field_path) from None
    except UnicodeError:   # a ValueError, not an OSError: the name has no bytes in the file-name encoding
        raise context.error(unencodable(noun, shown), node, key, field_path, hint=UNENCODABLE_HINT) from None
    except OSError as exc:
        raise context.error(f"cannot read {noun} {shown}: {exc.strerror or exc}", node, key, field_path) from None
    if size > limit[0]:
        raise context.error(f"{noun} {found} is {size:,} bytes, more than the limit of {limit[0]:,} ({limit[1]})",
                            node, key, field_path)
    return found


def host_builder(context: Context, node: dict, key: str, field_path: str, hint: str) -> HostBuilder:
    """``FILE.py:FUNCTION`` at ``node[key]``: the Python function and its file (relative to the spec, inside its
    project unless the user gave leave, as a kernel source is). `hint` shows the form where it is wrong."""
    value = node[key]
    text = value.strip() if isinstance(value, str) else ""
    path, _, function = text.rpartition(":")
    if not path or not IDENTIFIER.fullmatch(function):
        raise context.error(f"{key} is FILE.py:FUNCTION, a Python function and its file, got {kind_name(value)}",
                            node, key, field_path, hint=hint)
    found = project_file(context, node, key, field_path, "builder file", BUILDER_SUFFIXES,
                         (MAX_BUILDER_BYTES, "MAX_BUILDER_BYTES"), text=path)
    return HostBuilder(found, function)
