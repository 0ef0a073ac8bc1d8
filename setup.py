"""Build hook: ship the top-level kernels/ and specs/ inside the package of a wheel (see driver_gemm/bundled.py).

Everything else about the package is declared in pyproject.toml. The folders
stay at the top of the repository, where the specs, the tests and the docs
refer to them; a wheel (and so a plain ``pip install``) gets copies under
``driver_gemm/_data/``. An editable install imports from the checkout and
reads the top-level folders directly, so it gets no copies.
"""

from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
BUNDLED_FOLDERS = ("kernels", "specs")
PACKAGE_DATA = Path("driver_gemm") / "_data"


def bundled_files(folder: Path):
    """Every file of `folder` worth shipping: no hidden files, no caches."""
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") or part == "__pycache__" for part in relative.parts):
            yield path, relative


class build_py_with_bundled_data(build_py):
    """`build_py` that also copies kernels/ and specs/ into driver_gemm/_data/ of the build."""

    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        for name in BUNDLED_FOLDERS:
            source = ROOT / name
            if not source.is_dir():
                raise FileNotFoundError(f"{source} is missing: a driver-gemm build ships it as package data")
            for path, relative in bundled_files(source):
                target = Path(self.build_lib) / PACKAGE_DATA / name / relative
                self.mkpath(str(target.parent))
                self.copy_file(str(path), str(target))

    def get_outputs(self, include_bytecode=True):
        outputs = super().get_outputs(include_bytecode)
        if getattr(self, "editable_mode", False):
            return outputs
        return outputs + [str(Path(self.build_lib) / PACKAGE_DATA / name / relative)
                          for name in BUNDLED_FOLDERS for _, relative in bundled_files(ROOT / name)]


setup(cmdclass={"build_py": build_py_with_bundled_data})
