"""A memory refusal's two figures, what a case needs and what there is, are written so that they differ where the
byte counts do: never ``needs 24 GiB ... has 24 GiB``."""

from __future__ import annotations

import re

import pytest

from driver_gemm.measure.memory import MemoryNeeds, memory_refusal

GIB = 2**30


def _figures(text: str) -> list[str]:
    return re.findall(r"(\d[\d,.]*) (?:GiB|bytes)", text)


@pytest.mark.parametrize("needed, available", [
    (int(24.3 * GIB), int(23.5 * GIB)),      # both round to 24 as whole GiB
    (int(5.04 * GIB), int(5.01 * GIB)),      # both 5.0 to one decimal
    (24 * GIB + 4096, 24 * GIB),             # a page apart
])
def test_host_figures_that_round_alike_are_shown_apart(needed, available):
    text = memory_refusal(MemoryNeeds(host={"A": needed}), host=available, device=None)
    shown_needed, shown_available = _figures(text)
    assert shown_needed != shown_available, text
    assert "host memory for A" in text and "this machine has" in text


def test_figures_far_apart_keep_their_short_form():
    text = memory_refusal(MemoryNeeds(host={"A": 300 * GIB}), host=24 * GIB, device=None)
    assert "needs 300 GiB" in text and "has 24 GiB" in text, text
