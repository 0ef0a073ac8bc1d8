"""Theoretical occupancy from an architecture's published limits: a pure function, testable without a GPU.

It follows the CUDA occupancy calculator (cuda_occupancy.h): registers are
allocated per warp in units of 256 and shared out per SM sub-partition (a
quarter of the SM's register file each on these architectures); shared memory
per block is static + dynamic + the per-block reserve, rounded up to the 128-byte
allocation unit, against the largest carve-out (the driver's choice when the
kernel states no preference); warps, threads and blocks per SM cap the rest.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import UnknownArchError

KB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM and per-block limits of one compute capability (CUDA C++ Programming Guide, Table 
    "Technical Specifications per Compute Capability"), and the SM count of a typical part for planning."""

    arch: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    registers_per_block: int
    register_unit: int            # registers are allocated per warp in multiples of this
    sub_partitions: int           # the register file is split among this many schedulers
    shared_per_sm: int
    shared_carveouts_kb: tuple[int, ...]
    max_shared_per_block: int     # with the opt-in (cuFuncSetAttribute)
    default_shared_per_block: int  # without it
    reserved_shared_per_block: int
    shared_unit: int
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    warp_size: int = 32
    typical_sm_count: int = 0
    typical_part: str = ""


ARCHES: dict[str, ArchLimits] = {
    "sm_75": ArchLimits("sm_75", 1024, 32, 16, 65536, 255, 65536, 256, 4, 64 * KB, (32, 64), 64 * KB, 48 * KB,
                        0, 256, typical_sm_count=40, typical_part="Tesla T4"),
    "sm_80": ArchLimits("sm_80", 2048, 64, 32, 65536, 255, 65536, 256, 4, 164 * KB,
                        (0, 8, 16, 32, 64, 100, 132, 164), 163 * KB, 48 * KB, 1 * KB, 128,
                        typical_sm_count=108, typical_part="A100"),
    "sm_86": ArchLimits("sm_86", 1536, 48, 16, 65536, 255, 65536, 256, 4, 100 * KB,
                        (0, 8, 16, 32, 64, 100), 99 * KB, 48 * KB, 1 * KB, 128,
                        typical_sm_count=84, typical_part="RTX 3090 / A40"),
    "sm_89": ArchLimits("sm_89", 1536, 48, 24, 65536, 255, 65536, 256, 4, 100 * KB,
                        (0, 8, 16, 32, 64, 100), 99 * KB, 48 * KB, 1 * KB, 128,
                        typical_sm_count=128, typical_part="RTX 4090 / L40S"),
    "sm_90": ArchLimits("sm_90", 2048, 64, 32, 65536, 255, 65536, 256, 4, 228 * KB,
                        (0, 8, 16, 32, 64, 100, 132, 164, 196, 228), 227 * KB, 48 * KB, 1 * KB, 128,
                        typical_sm_count=132, typical_part="H100 SXM / H200"),
}


def base_arch(arch: str) -> str:
    """``sm_90a`` or ``sm_100f`` without its arch- or family-specific suffix: the GPU it runs on."""
    return arch[:-1] if arch[-1:] in ("a", "f") else arch


def arch_limits(arch: str) -> ArchLimits:
    """The limits table for ``sm_XY``; ``sm_90a`` style suffixes use the base architecture."""
    try:
        return ARCHES[base_arch(arch)]
    except KeyError:
        raise UnknownArchError(f"no occupancy table for {arch} (have {', '.join(ARCHES)})") from None


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM, what limits them, and what that means for the launch."""

    blocks_per_sm: int
    limited_by: tuple[str, ...]       # every limit equal to the minimum: registers, shared memory, warps, blocks
    limits: dict                      # blocks per SM allowed by each resource
    warps_per_block: int
    active_warps: int
    occupancy: float                  # active warps / maximum warps per SM
    registers_per_warp: int
    shared_per_block: int             # as allocated: with reserve and rounding
    shared_carveout_kb: int | None    # smallest carve-out holding the resident blocks' shared memory
    reason: str = ""                  # why no block fits, when blocks_per_sm == 0

    def as_dict(self) -> dict:
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def occupancy(limits: ArchLimits, threads_per_block: int, registers_per_thread: int,
              static_shared_bytes: int = 0, dynamic_shared_bytes: int = 0) -> Occupancy:
    """Theoretical resident blocks per SM of a kernel launched with `threads_per_block` threads."""
    warps = -(-threads_per_block // limits.warp_size)
    registers_per_warp = _ceil_to(max(registers_per_thread, 1) * limits.warp_size, limits.register_unit)
    shared_per_block = _ceil_to(static_shared_bytes + dynamic_shared_bytes + limits.reserved_shared_per_block,
                                limits.shared_unit)
    reason = ""
    if threads_per_block < 1 or threads_per_block > limits.max_threads_per_block:
        reason = f"{threads_per_block} threads per block (1 to {limits.max_threads_per_block} allowed)"
    elif registers_per_thread > limits.max_registers_per_thread:
        reason = f"{registers_per_thread} registers per thread (at most {limits.max_registers_per_thread})"
    elif registers_per_warp * warps > limits.registers_per_block:
        reason = (f"{registers_per_warp * warps} registers per block ({registers_per_thread} per thread, "
                  f"{warps} warps) exceed the {limits.registers_per_block} a block may have")
    elif static_shared_bytes + dynamic_shared_bytes > limits.max_shared_per_block:
        reason = (f"{static_shared_bytes + dynamic_shared_bytes} bytes of shared memory per block "
                  f"exceed the {limits.max_shared_per_block} allowed")

    per_sub_partition = limits.registers_per_sm // limits.sub_partitions
    warps_by_registers = (per_sub_partition // registers_per_warp) * limits.sub_partitions
    by_limit = {
        "warps": min(limits.max_warps_per_sm // warps, limits.max_threads_per_sm // max(threads_per_block, 1))
        if warps else 0,
        "registers": warps_by_registers // warps if warps else 0,
        "shared memory": limits.shared_per_sm // shared_per_block if shared_per_block else limits.max_blocks_per_sm,
        "blocks": limits.max_blocks_per_sm,
    }
    blocks = 0 if reason else min(by_limit.values())
    limited_by = tuple(name for name, value in by_limit.items() if value == blocks) if not reason else ()
    carveout = None
    if blocks:
        needed_kb = math.ceil(blocks * shared_per_block / KB)
        carveout = next((c for c in limits.shared_carveouts_kb if c >= needed_kb), None)
    return Occupancy(
        blocks_per_sm=blocks, limited_by=limited_by, limits=by_limit, warps_per_block=warps,
        active_warps=blocks * warps, occupancy=blocks * warps / limits.max_warps_per_sm,
        registers_per_warp=registers_per_warp, shared_per_block=shared_per_block,
        shared_carveout_kb=carveout, reason=reason,
    )


def waves(total_blocks: int, blocks_per_sm: int, sm_count: int) -> float:
    """How many full rounds of resident blocks the grid takes; the fraction is the tail wave's fill."""
    if blocks_per_sm <= 0 or sm_count <= 0:
        return math.inf
    return total_blocks / (blocks_per_sm * sm_count)
