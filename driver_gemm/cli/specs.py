"""``driver-gemm specs``: the shipped specs, by the name that runs, plans or tunes one from any folder."""

from __future__ import annotations

from .. import bundled
from ..errors import SpecError
from ..report.lines import say
from .common import Output
from .exit_codes import EXIT_OK


def add_parser(commands, **common) -> None:
    specs = commands.add_parser("specs", help="list the shipped specs, each with a line about it; run, plan and "
                                              "tune take one by its name (driver-gemm plan fast)", **common)
    specs.add_argument("--paths", action="store_true", help="print each spec's file instead of its description")


def execute(args, out: Output) -> int:
    # lazy: a command imports this when it runs, after its GPUs' workers are spawned
    from ..specfile.shipped import shipped_specs

    shipped = shipped_specs()
    if not shipped:
        raise SpecError("no shipped specs: the install lacks its data", where=str(bundled.specs_dir()))
    width = max(len(spec.name) for spec in shipped)
    for spec in shipped:
        say(out.console, f"{spec.name:<{width}}  {spec.path if args.paths else spec.description}")
    return EXIT_OK
