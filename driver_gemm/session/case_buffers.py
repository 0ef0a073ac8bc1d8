"""A case's own device buffers (workspaces, alpha and beta by pointer): allocated, filled, and reset.

Each `planning.buffer_plans.BufferPlan` gets a device buffer of its own, owned by the launch that
passes its address (a tuner keeps many launches bound at once, each with its buffers), filled when
the launch is bound and, unless it is read-only (alpha and beta by pointer), again before every
sample. Contents that are one 32-bit word repeated (a zeroed workspace, a constant) are reset with
``cuMemsetD32Async``; any other pattern is uploaded once to a second buffer and copied back with
``cuMemcpyDtoDAsync``. Both are asynchronous on the case's stream, so the timing can enqueue them
before a sample's start event without waiting (docs/timing.md).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..cuda.device import DeviceBuffer
from ..planning.buffer_plans import BufferPlan
from ..planning.quantized_layouts import QuantizedDraw


def device_buffers(session, plans: dict[str, BufferPlan], draw: QuantizedDraw | None = None
                   ) -> tuple[dict[str, DeviceBuffer], list[Callable[[], None]], list[DeviceBuffer]]:
    """The device buffer of each of `plans` by argument name, their contents enqueued on the session's
    stream (a quantized B's parts laid out from `draw`, the values the case drew B from); the resets to
    enqueue before every sample (none for read-only buffers: alpha, beta, a quantized B's parts); and every
    buffer made, for the launch to keep (they are freed with it, or with the device)."""
    stream, owned = session.stream, []
    buffers, resets = {}, []
    for name, plan in plans.items():
        target = buffers[name] = session.device.alloc(plan.nbytes)
        owned.append(target)
        word = plan.repeated_word()
        if word is not None:
            reset = _memset(target, word, plan.nbytes, stream)
        else:
            initial = session.device.upload(np.ascontiguousarray(plan.initial_bytes(draw)), stream)
            owned.append(initial)
            reset = _copy(target, initial, plan.nbytes, stream)
        reset()
        if not plan.read_only:
            resets.append(reset)
    return buffers, resets, owned


def _memset(target: DeviceBuffer, word: int, nbytes: int, stream) -> Callable[[], None]:
    return lambda: target.fill_u32(word, stream, nbytes)


def _copy(target: DeviceBuffer, initial: DeviceBuffer, nbytes: int, stream) -> Callable[[], None]:
    return lambda: target.copy_from(initial, nbytes, stream)
