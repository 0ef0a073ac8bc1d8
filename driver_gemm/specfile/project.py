"""The project a spec belongs to: the tree its kernel sources, headers and fill files must stay in."""

from __future__ import annotations

from pathlib import Path

from ..bundled import PACKAGE_DATA_DIR
from .limits import PROJECT_MARKERS


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
