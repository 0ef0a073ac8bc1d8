"""A case's own device buffers (workspaces, alpha and beta by pointer): allocated, filled, and reset.

Each `planning.buffer_plans.BufferPlan` gets a device buffer, kept by the session under the name
``buffer:NAME`` and reused while it fits, filled when the case's launch is bound and, unless it is
read-only (alpha and beta by pointer), again before every sample. Contents that are one 32-bit word repeated (a zeroed
workspace, a constant) are reset with ``cuMemsetD32Async``; any other pattern is uploaded once to a
second buffer (``buffer:NAME:initial``) and copied back with ``cuMemcpyDtoDAsync``. Both are
asynchronous on the case's stream, so the timing can enqueue them before a sample's start event
without waiting (docs/timing.md).
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ..cuda.device import DeviceBuffer
from ..planning.buffer_plans import BufferPlan


def device_buffers(session, plans: dict[str, BufferPlan]) -> tuple[dict[str, DeviceBuffer], list[Callable[[], None]]]:
    """The device buffer of each of `plans` by argument name, their contents enqueued on the session's
    stream, and the resets to enqueue before every sample (none for read-only buffers: alpha, beta)."""
    if not plans:
        return {}, []
    stream = session.stream
    words = {name: plan.repeated_word() for name, plan in plans.items()}
    sizes = {f"buffer:{name}": plan.nbytes for name, plan in plans.items()}
    sizes.update({f"buffer:{name}:initial": plan.nbytes for name, plan in plans.items() if words[name] is None})
    held = session.buffers_of_sizes(sizes)
    buffers, resets = {}, []
    for name, plan in plans.items():
        target = buffers[name] = held[f"buffer:{name}"]
        if words[name] is not None:
            reset = _memset(target, words[name], plan.nbytes, stream)
        else:
            initial = held[f"buffer:{name}:initial"]
            initial.upload(np.ascontiguousarray(plan.initial_bytes()), stream)
            reset = _copy(target, initial, plan.nbytes, stream)
        reset()
        if not plan.read_only:
            resets.append(reset)
    return buffers, resets


def _memset(target: DeviceBuffer, word: int, nbytes: int, stream) -> Callable[[], None]:
    return lambda: target.fill_u32(word, stream, nbytes)


def _copy(target: DeviceBuffer, initial: DeviceBuffer, nbytes: int, stream) -> Callable[[], None]:
    return lambda: target.copy_from(initial, nbytes, stream)
