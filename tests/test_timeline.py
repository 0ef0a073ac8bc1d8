"""A command's timeline: moments in seconds since its process started, and the moments a GPU's worker notes."""

import json
import subprocess
import sys

from driver_gemm import timeline

from conftest import ROOT


def test_the_origin_is_the_process_start_not_the_import():
    # Half a second passes before the module is imported: its clock must count it.
    script = ("import time; time.sleep(0.5); from driver_gemm import timeline; "
              "timeline.mark('imported'); print(timeline.marks()['imported'])")
    seconds = float(subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True,
                                   check=True).stdout)
    assert 0.5 <= seconds < 10


def test_moments_come_back_in_the_order_they_happened_and_first_keeps_the_first():
    timeline.forget()
    timeline.mark("b", at=timeline._ORIGIN + 2.0)
    timeline.mark("a", at=timeline._ORIGIN + 1.0)
    timeline.mark("a", first=True, at=timeline._ORIGIN + 3.0)        # already noted: kept at 1 s
    timeline.mark("c", at=timeline._ORIGIN + 1.5)
    timeline.mark("c", at=timeline._ORIGIN + 4.0)                     # noted again: moved
    assert timeline.marks() == {"a": 1.0, "b": 2.0, "c": 4.0}
    assert json.loads(json.dumps(timeline.marks())) == timeline.marks()    # as the results file holds it
    timeline.forget()
    assert timeline.marks() == {}
