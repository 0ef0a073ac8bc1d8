"""`plan` (`planning.spec_plan.plan_spec`, what the command prints) notes a beta the spec wrote that an accumulating
kernel does not take, and not the built-in one, as a run's plans do (tests/test_written_scalars.py). No GPU."""

from __future__ import annotations

from driver_gemm.planning.spec_plan import plan_spec
from driver_gemm.specfile import load_spec

from test_spec import MINIMAL, write

ACCUMULATE = MINIMAL + "    epilogue: accumulate\n"


def scalar_notes(tmp_path, text: str) -> list[str]:
    plans = plan_spec(load_spec(write(tmp_path, text)), "sm_90").plans
    return [note for plan in plans for note in plan.notes if note.startswith("scalars:")]


def test_plan_notes_a_written_beta_of_zero_and_not_the_default(tmp_path):
    written = scalar_notes(tmp_path, "scalars: {beta: 0}\n" + ACCUMULATE)
    assert written and written[0].startswith("scalars: beta = 0 does not reach this kernel")
    assert scalar_notes(tmp_path, ACCUMULATE) == []
