"""On a GPU: the memory check reads the device's free memory, and a shape beyond the machine is refused for every
row, vendor rows included, before anything of it is allocated."""

from __future__ import annotations

import time

import pytest

import driver_gemm as dg
from driver_gemm.cuda.device import Device
from driver_gemm.measure import memory

from test_spec import MINIMAL, write

pytestmark = pytest.mark.gpu


def test_the_free_memory_of_the_device_is_read():
    device = Device(0)
    try:
        free = memory.device_available(device)
        assert 0 < free <= device.properties.total_memory_bytes
    finally:
        device.close()


@pytest.mark.parametrize("shape", ["[262144, 262144, 262144]", "[64, 2147483648, 16]"])
def test_a_shape_beyond_the_machine_is_invalid_for_every_row_at_once(tmp_path, shape):
    spec = dg.load_spec(write(tmp_path, MINIMAL.replace("[64, 32, 16]", shape)
                              .replace("shapes:", "baseline: true\nshapes:")))
    began = time.monotonic()
    run = dg.run_spec(spec, placement=dg.Placement(isolate=True))
    assert time.monotonic() - began < 120
    assert [case.status for case in run.cases] == ["INVALID", "INVALID"], [case.message for case in run.cases]
    assert all("needs" in case.message or "cuBLAS takes M, N and K as int" in case.message
               or "does not fit int32" in case.message for case in run.cases)
