"""The specs shipped with driver-gemm, by name: what ``driver-gemm specs`` lists and ``plan fast`` reads.

A spec argument is a file, or the bare name of a shipped spec (``fast`` or
``fast.yaml``); an existing file of that name always wins, so a local
``fast.yaml`` is read before the shipped one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .. import bundled
from ..errors import SpecError


@dataclass(frozen=True)
class ShippedSpec:
    """One shipped spec: the `name` that reaches it from any folder, its file, its one-line description."""

    name: str
    path: Path
    description: str


def shipped_specs() -> list[ShippedSpec]:
    """Every shipped spec, sorted by name (empty for an install that lacks its data)."""
    return [ShippedSpec(path.stem, path, bundled.spec_summary(path)) for path in bundled.shipped_specs()]


def resolve_spec(path: str | Path) -> Path:
    """The file a spec argument names: an existing path as given, else the shipped spec of that bare name.

    A bare name (no folder in it) that is neither is refused with the shipped
    specs listed; any other path is left for the loader to report as missing.
    """
    if not str(path).strip():   # Path("") is ".", the current folder: say what was given instead
        names = ", ".join(spec.stem for spec in bundled.shipped_specs()) or "none (the install lacks its data)"
        raise SpecError(f"the spec argument is empty: name a spec file or a shipped spec ({names})",
                        hint="driver-gemm specs describes them")
    path = Path(path)
    try:
        if path.exists():
            return path
    except OSError as exc:   # a folder that may not be searched, a name too long: not a missing file
        raise SpecError(f"cannot read spec: {exc.strerror or exc}", where=str(path)) from None
    shipped = bundled.shipped_spec(str(path))
    if shipped is not None:
        return shipped
    if path.parent != Path("."):
        return path
    names = ", ".join(spec.stem for spec in bundled.shipped_specs()) or "none (the install lacks its data)"
    raise SpecError(f"no such file, nor a shipped spec of that name; the shipped specs are {names}",
                    where=str(path), hint="driver-gemm specs describes them")
