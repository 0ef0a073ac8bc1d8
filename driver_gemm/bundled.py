"""Where the seed kernels and specs are: the checkout's top-level folders, else the copies shipped in the package.

A checkout (or an editable install) has ``kernels/`` and ``specs/`` beside the package; a wheel or
sdist copies both into ``driver_gemm/_data/`` (``setup.py``). Either way they stay side by side, so
the specs' relative ``source:`` paths hold. Imports nothing from the rest of driver-gemm, so that
any layer may use it.
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


def shipped_specs() -> list[Path]:
    """Every shipped spec, sorted by name (empty for a broken install without its data)."""
    return sorted(specs_dir().glob("*.yaml"), key=lambda path: path.stem)


def shipped_spec(name: str) -> Path | None:
    """The shipped spec a bare name (``fast`` or ``fast.yaml``) stands for, or None when it names none.

    A name with a folder in it (``specs/fast.yaml``) is a path, never a
    shipped spec's name.
    """
    if not name or Path(name).name != name or name.startswith("."):
        return None
    stem = name[:-len(".yaml")] if name.endswith(".yaml") else name
    path = specs_dir() / f"{stem}.yaml"
    return path if path.is_file() else None


def spec_summary(path: Path) -> str:
    """A spec's one-line description: its ``description:``, else its ``name:``, else '' (one it cannot read)."""
    import yaml   # lazy: only a listing of the specs reads them here

    try:
        document = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        return ""
    if not isinstance(document, dict):
        return ""
    for key in ("description", "name"):
        if isinstance(document.get(key), str) and document[key].strip():
            return " ".join(document[key].split())
    return ""
