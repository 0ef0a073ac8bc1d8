"""Where the seed kernels and specs are: the checkout's top-level folders, else the copies shipped in the package.

A source checkout (and an editable install, which imports from it) keeps the
kernel sources in ``kernels/`` and the specs in ``specs/`` beside the
``driver_gemm`` package. A wheel or sdist build copies both folders into the
package as ``driver_gemm/_data/kernels`` and ``driver_gemm/_data/specs``
(``setup.py``), so that an ordinary install finds them too. Either way the two
folders stay side by side under one data root, so the specs' ``source:``
paths, relative to the spec file (``../kernels/02_smem_tiles.cu``), hold.

Imports nothing from the rest of driver-gemm, so that any layer may use it.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PACKAGE_DATA_DIR = PACKAGE_DIR / "_data"
KERNELS = "kernels"
SPECS = "specs"
DEFAULT_SPEC_NAME = "seed.yaml"


def checkout_root() -> Path | None:
    """The source checkout this package is imported from, or None for an installed copy.

    A checkout is recognised by its ``pyproject.toml`` beside the package and
    the default spec and the kernels folder under it.
    """
    root = PACKAGE_DIR.parent
    if ((root / "pyproject.toml").is_file() and (root / SPECS / DEFAULT_SPEC_NAME).is_file()
            and (root / KERNELS).is_dir()):
        return root
    return None


def data_root() -> Path:
    """The folder that holds ``kernels/`` and ``specs/``: the checkout's root, else the package's data folder.

    For an installed copy whose data is missing (a broken build), this is
    still the package's data folder, so that what is then not found is
    reported by the path it was expected at.
    """
    return checkout_root() or PACKAGE_DATA_DIR


def kernels_dir() -> Path:
    """The seed kernel sources and the headers they include."""
    return data_root() / KERNELS


def specs_dir() -> Path:
    """The shipped specs (seed, fast, tf32, ramp, the sweeps)."""
    return data_root() / SPECS


def default_spec_path() -> Path:
    """The spec ``driver-gemm run`` and ``plan`` use when given none: ``specs/seed.yaml``."""
    return specs_dir() / DEFAULT_SPEC_NAME
