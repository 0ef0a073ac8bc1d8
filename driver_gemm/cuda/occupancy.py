"""Architecture limits and theoretical occupancy: pure functions, testable without a GPU.

On a GPU, `limits_from_device` takes every figure the driver reports and fills in the few it does
not (allocation units, granularities) from its architecture's table, so any compute capability
works; offline (`plan --arch sm_XY`), `arch_limits` reads the tables below. `occupancy` follows the
CUDA occupancy calculator (``cuda_occupancy.h``): registers per warp and sub-partition, shared
memory with the per-block reserve rounded to the allocation unit, then warps, threads and blocks, and from
9.x on the block barriers an SM has (`block_barriers_per_sm`).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass

from ..errors import ConfigError, WrongArgumentType, WrongArgumentValue

KB = 1024

# FP32 lanes (FFMA units) per SM by compute capability (CUDA C++ Programming Guide,
# "Arithmetic Instructions" throughput table: results per clock per SM for 32-bit fma).
FP32_LANES_PER_SM = {
    (7, 0): 64, (7, 2): 64, (7, 5): 64,
    (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
    (9, 0): 128,
    (10, 0): 128, (10, 3): 128, (11, 0): 128, (12, 0): 128, (12, 1): 128,
}


@dataclass(frozen=True)
class ArchLimits:
    """Per-SM and per-block limits of one compute capability, and the SM count of a typical part for planning.

    `source` says where the figures come from (a table, or a device's driver
    plus a table); `notes` say what had to be assumed.
    """

    arch: str
    max_threads_per_sm: int
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    max_registers_per_thread: int
    registers_per_block: int
    register_unit: int            # registers are allocated per warp in multiples of this
    sub_partitions: int           # the register file is split among this many schedulers; a block's warps are
                                  # rounded up to it for the per-block check (the "warp allocation granularity")
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
    fp32_lanes_per_sm: int = 0    # FFMA results per clock per SM; 0 when unknown
    barriers_per_sm: int = 0      # block barriers an SM has (`block_barriers_per_sm`); 0: not a limit to count
    source: str = "table"
    notes: tuple[str, ...] = ()

    @property
    def warp_allocation_granularity(self) -> int:
        return self.sub_partitions

    @property
    def compute_capability(self) -> tuple[int, int]:
        return parse_arch(self.arch)


# Carve-outs (KB of shared memory an SM can be configured with), as cuda_occupancy.h rounds a request up to them.
VOLTA_CARVEOUTS = (0, 8, 16, 32, 64, 96)
TURING_CARVEOUTS = (32, 64)
A100_CARVEOUTS = (0, 8, 16, 32, 64, 100, 132, 164)
GA10X_CARVEOUTS = (0, 8, 16, 32, 64, 100)
HOPPER_CARVEOUTS = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)


def block_barriers_per_sm(compute_capability: tuple[int, int], max_blocks_per_sm: int) -> int:
    """The block barriers (``bar.sync`` ids) an SM has for its resident blocks, as the occupancy calculator counts
    them from 9.x on (``cudaOccMaxBlocksPerSMBlockBarrierLimit``): two per block an SM may hold, one on 10.1, 11.0
    and 12.x; 0 before 9.x, where the calculator (and so the driver's occupancy API) does not count them. A block
    takes as many as ptxas's "used N barriers" says. A major newer than the calculator knows gets one per block,
    the smaller count."""
    major, minor = compute_capability
    if major < 9:
        return 0
    two_per_block = major in (9, 10, 11) and (major, minor) not in ((10, 1), (11, 0))
    return max_blocks_per_sm * (2 if two_per_block else 1)


def _table(arch: str, *, threads: int, blocks: int, shared_kb: int, carveouts: tuple[int, ...],
           per_block_kb: int, reserved: int, shared_unit: int, sms: int, part: str) -> ArchLimits:
    # Every architecture here has 64 K registers per SM and per block, 255 per thread, registers allocated
    # per warp in units of 256 over 4 sub-partitions, and 48 KB of shared memory per block without the opt-in.
    compute_capability = (int(arch[3:-1]), int(arch[-1]))
    return ArchLimits(arch, max_threads_per_sm=threads, max_warps_per_sm=threads // 32, max_blocks_per_sm=blocks,
                      registers_per_sm=65536, max_registers_per_thread=255, registers_per_block=65536,
                      register_unit=256, sub_partitions=4, shared_per_sm=shared_kb * KB,
                      shared_carveouts_kb=carveouts, max_shared_per_block=per_block_kb * KB,
                      default_shared_per_block=48 * KB, reserved_shared_per_block=reserved, shared_unit=shared_unit,
                      typical_sm_count=sms, typical_part=part,
                      fp32_lanes_per_sm=FP32_LANES_PER_SM[compute_capability],
                      barriers_per_sm=block_barriers_per_sm(compute_capability, blocks))


# Sources, per entry:
#   [guide]  CUDA C++ Programming Guide, "Compute Capabilities" appendix, "Technical Specifications per Compute
#            Capability": resident threads, warps and blocks per SM, registers, shared memory per SM and per block.
#   [occ]    cuda_occupancy.h of CUDA 13.0 (the occupancy calculator the driver's occupancy API follows): blocks
#            per SM, carve-outs, shared allocation unit (256 B up to 7.x, 128 B from 8.x), register allocation
#            unit (256) and sub-partitions (4), the 1 KB per-block reserve applied from 8.x.
#   [arith]  CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table: 32-bit FMA results per
#            clock per SM, the FP32 lanes of the peak figure.
#   Block barriers an SM has: cuda_occupancy.h of CUDA 13.0, cudaOccMaxBlocksPerSMBlockBarrierLimit
#            (`block_barriers_per_sm`, computed from the blocks an SM holds).
# The SM count is a part's, not the architecture's: it only sizes `plan --arch` (and `--sms` overrides it).
ARCHES: dict[str, ArchLimits] = {
    # Volta V100 [guide 7.0, occ major 7, arith 7.x]
    "sm_70": _table("sm_70", threads=2048, blocks=32, shared_kb=96, carveouts=VOLTA_CARVEOUTS, per_block_kb=96,
                    reserved=0, shared_unit=256, sms=80, part="Tesla V100"),
    # Jetson AGX Xavier [guide 7.2, occ major 7, arith 7.x]
    "sm_72": _table("sm_72", threads=2048, blocks=32, shared_kb=96, carveouts=VOLTA_CARVEOUTS, per_block_kb=96,
                    reserved=0, shared_unit=256, sms=8, part="Jetson AGX Xavier"),
    # Turing [guide 7.5, occ "isTuring": 16 blocks, 32 or 64 KB, arith 7.x]
    "sm_75": _table("sm_75", threads=1024, blocks=16, shared_kb=64, carveouts=TURING_CARVEOUTS, per_block_kb=64,
                    reserved=0, shared_unit=256, sms=40, part="Tesla T4"),
    # Ampere A100 [guide 8.0, occ major 8 minor 0, arith 8.0]
    "sm_80": _table("sm_80", threads=2048, blocks=32, shared_kb=164, carveouts=A100_CARVEOUTS, per_block_kb=163,
                    reserved=KB, shared_unit=128, sms=108, part="A100"),
    # Ampere GA10x [guide 8.6, occ major 8 other minors: 16 blocks, up to 100 KB, arith 8.6]
    "sm_86": _table("sm_86", threads=1536, blocks=16, shared_kb=100, carveouts=GA10X_CARVEOUTS, per_block_kb=99,
                    reserved=KB, shared_unit=128, sms=84, part="A40 / RTX A6000"),
    # Jetson AGX Orin [guide 8.7, occ major 8 minor 7: A100's carve-outs, 16 blocks, arith 8.7]
    "sm_87": _table("sm_87", threads=1536, blocks=16, shared_kb=164, carveouts=A100_CARVEOUTS, per_block_kb=163,
                    reserved=KB, shared_unit=128, sms=16, part="Jetson AGX Orin"),
    # Ada [guide 8.9, occ major 8 minor 9: 24 blocks, arith 8.9]
    "sm_89": _table("sm_89", threads=1536, blocks=24, shared_kb=100, carveouts=GA10X_CARVEOUTS, per_block_kb=99,
                    reserved=KB, shared_unit=128, sms=128, part="RTX 4090"),
    # Hopper [guide 9.0, occ major 9, arith 9.0]
    "sm_90": _table("sm_90", threads=2048, blocks=32, shared_kb=228, carveouts=HOPPER_CARVEOUTS, per_block_kb=227,
                    reserved=KB, shared_unit=128, sms=132, part="H100 SXM / H200"),
    # Blackwell B200 [guide 10.0, occ major 10 minor 0, arith 10.0]
    "sm_100": _table("sm_100", threads=2048, blocks=32, shared_kb=228, carveouts=HOPPER_CARVEOUTS, per_block_kb=227,
                     reserved=KB, shared_unit=128, sms=148, part="B200"),
    # Blackwell Ultra B300 [guide 10.3, occ major 10 minor 3, arith 10.3]; SM count taken as B200's
    "sm_103": _table("sm_103", threads=2048, blocks=32, shared_kb=228, carveouts=HOPPER_CARVEOUTS, per_block_kb=227,
                     reserved=KB, shared_unit=128, sms=148, part="B300"),
    # Blackwell GeForce / RTX PRO [guide 12.x, occ major 12: 24 blocks, up to 100 KB, arith 12.x]
    "sm_120": _table("sm_120", threads=1536, blocks=24, shared_kb=100, carveouts=GA10X_CARVEOUTS, per_block_kb=99,
                     reserved=KB, shared_unit=128, sms=170, part="RTX 5090"),
    # DGX Spark GB10 [guide 12.x, occ major 12 minor 1, arith 12.x]
    "sm_121": _table("sm_121", threads=1536, blocks=24, shared_kb=100, carveouts=GA10X_CARVEOUTS, per_block_kb=99,
                     reserved=KB, shared_unit=128, sms=48, part="GB10 (DGX Spark)"),
}

# What an architecture with no table of its major gets for the figures the driver does not report: the
# allocation units every architecture since Maxwell uses, and the larger (so fewer blocks) shared unit.
DEFAULT_REGISTER_UNIT = 256
DEFAULT_SUB_PARTITIONS = 4
DEFAULT_SHARED_UNIT = 256
DEFAULT_MAX_REGISTERS_PER_THREAD = 255

_ARCH_PATTERN = re.compile(r"(?:sm_?|compute_)?(\d{2,3})([af]?)")


def known_arches() -> tuple[str, ...]:
    return tuple(ARCHES)


def base_arch(arch: str) -> str:
    """``sm_90a`` or ``sm_100f`` without its arch- or family-specific suffix: the GPU it runs on."""
    return arch[:-1] if arch[-1:] in ("a", "f") else arch


def parse_arch(arch: str) -> tuple[int, int]:
    """The compute capability ``(major, minor)`` of ``sm_XY`` (``sm_90a``, ``sm_100f``, ``compute_90`` too).

    Anything else raises a `ConfigError` on field ``--arch`` that lists the
    architectures with a table.
    """
    match = _ARCH_PATTERN.fullmatch(str(arch).strip().lower())
    if not match:
        raise ConfigError(f"not a GPU architecture: {arch!r}", field="--arch",
                          hint=f"use sm_XY, e.g. one of {', '.join(ARCHES)}")
    digits = match.group(1)
    return int(digits[:-1]), int(digits[-1])


def arch_name(compute_capability: tuple[int, int]) -> str:
    major, minor = compute_capability
    return f"sm_{major}{minor}"


def arch_limits(arch: str) -> ArchLimits:
    """The limits table for ``sm_XY`` (``sm_90a`` style suffixes use the base architecture).

    An architecture with no table raises a `ConfigError` on field ``--arch``
    naming the known ones: offline planning needs a table, while on a GPU
    `limits_from_device` works for any architecture. Anything but text is a
    `WrongArgumentType` naming this function (a rig's None is no ``--arch``).
    """
    if not isinstance(arch, str):
        raise WrongArgumentType(f"arch_limits: arch is an architecture's name as text ('sm_90'), "
                                f"got {arch!r:.40} ({type(arch).__name__})")
    name = arch_name(parse_arch(arch))
    try:
        return ARCHES[name]
    except KeyError:
        raise ConfigError(f"no architecture table for {arch} (known: {', '.join(ARCHES)})", field="--arch",
                          hint="on the GPU itself the limits come from its driver; offline, "
                               "plan for the nearest known architecture and give the SM count with --sms") from None


def nearest_known_arch(compute_capability: tuple[int, int]) -> str | None:
    """The table to borrow from: the architecture itself, else the newest older one of the same major, else None."""
    major, minor = compute_capability
    same_major = [parse_arch(name) for name in ARCHES if parse_arch(name)[0] == major]
    older = [cc for cc in same_major if cc[1] <= minor]
    return arch_name(max(older)) if older else None


def _carveouts_up_to(carveouts: tuple[int, ...], shared_per_sm: int) -> tuple[int, ...]:
    """The table's carve-outs that the device's shared memory holds, ending with the device's own size."""
    top_kb = shared_per_sm // KB
    kept = tuple(kb for kb in carveouts if kb < top_kb)
    return kept + (top_kb,)


def limits_from_device(properties) -> ArchLimits:
    """The limits of a real GPU, for any compute capability: the driver's figures, the table's for the rest.

    `properties` is a `cuda.device.DeviceProperties`. Threads, warps, blocks,
    registers and shared memory per SM and per block, the per-block reserve,
    block and grid dimensions and the SM count come from the driver (warps per
    SM as threads per SM / warp size, as the occupancy calculator does). The
    figures it does not report (register allocation unit, sub-partitions, the
    shared allocation unit and carve-outs, registers per thread, FP32 lanes)
    come from the architecture's table, else from the newest older table of
    the same major (with a note), else from conservative defaults (with a note). The block barriers an SM
    has follow from its compute capability and the driver's blocks an SM (`block_barriers_per_sm`).
    """
    arch = properties.arch
    reference_name = nearest_known_arch(properties.compute_capability)
    notes: list[str] = []
    if reference_name == arch:
        reference = ARCHES[arch]
        source = f"driver + {arch} table"
    elif reference_name is not None:
        reference = ARCHES[reference_name]
        source = f"driver + {reference_name} table"
        notes.append(f"{arch} has no table: allocation units, carve-outs and FP32 lanes per SM are "
                     f"{reference_name}'s, the nearest older architecture of the same major")
    else:
        reference = None
        source = "driver + defaults"
        notes.append(f"{arch} has no table and no older architecture of its major does: registers are taken as "
                     f"allocated in units of {DEFAULT_REGISTER_UNIT} over {DEFAULT_SUB_PARTITIONS} sub-partitions, "
                     f"shared memory in units of {DEFAULT_SHARED_UNIT} B"
                     + ("" if properties.compute_capability in FP32_LANES_PER_SM else ", and the FP32 peak is unknown"))
    # The lanes table covers more architectures than the limits tables (it is one line per
    # architecture), so it is asked first, as DeviceProperties asks it: one peak for one GPU.
    fp32_lanes = FP32_LANES_PER_SM.get(properties.compute_capability,
                                       reference.fp32_lanes_per_sm if reference else 0)
    warp_size = properties.warp_size or 32
    shared_per_sm = properties.shared_per_sm
    return ArchLimits(
        arch=arch,
        max_threads_per_sm=properties.max_threads_per_sm,
        max_warps_per_sm=properties.max_threads_per_sm // warp_size,
        max_blocks_per_sm=properties.max_blocks_per_sm,
        registers_per_sm=properties.registers_per_sm,
        max_registers_per_thread=reference.max_registers_per_thread if reference
        else DEFAULT_MAX_REGISTERS_PER_THREAD,
        registers_per_block=properties.registers_per_block,
        register_unit=reference.register_unit if reference else DEFAULT_REGISTER_UNIT,
        sub_partitions=reference.sub_partitions if reference else DEFAULT_SUB_PARTITIONS,
        shared_per_sm=shared_per_sm,
        shared_carveouts_kb=_carveouts_up_to(reference.shared_carveouts_kb if reference else (), shared_per_sm),
        max_shared_per_block=max(properties.max_shared_per_block_optin, properties.max_shared_per_block),
        default_shared_per_block=properties.max_shared_per_block,
        reserved_shared_per_block=properties.reserved_shared_per_block,
        shared_unit=reference.shared_unit if reference else DEFAULT_SHARED_UNIT,
        max_threads_per_block=properties.max_threads_per_block,
        max_block_dims=tuple(properties.max_block_dims),
        max_grid_dims=tuple(properties.max_grid_dims),
        warp_size=warp_size,
        typical_sm_count=properties.sm_count,
        typical_part=properties.name,
        fp32_lanes_per_sm=fp32_lanes,
        barriers_per_sm=block_barriers_per_sm(properties.compute_capability, properties.max_blocks_per_sm),
        source=source,
        notes=tuple(notes),
    )


@dataclass(frozen=True)
class Occupancy:
    """Resident blocks per SM, what limits them, and what that means for the launch."""

    blocks_per_sm: int
    limited_by: tuple[str, ...]       # every limit equal to the minimum: warps, registers, shared memory, blocks,
                                      # barriers
    limits: dict                      # blocks per SM allowed by each resource
    warps_per_block: int
    active_warps: int
    occupancy: float                  # active warps / maximum warps per SM
    registers_per_warp: int
    shared_per_block: int             # as allocated: with reserve and rounding
    shared_carveout_kb: int | None    # smallest carve-out holding the resident blocks' shared memory
    reason: str = ""                  # why no block fits, when blocks_per_sm == 0
    hint: str = ""                    # what to change so that a block fits, where `reason` has a way out

    def __hash__(self) -> int:
        # Frozen figures hash (a rig keys plans by them); `limits` is a dict, which no hash takes: its items stand in.
        return hash(tuple(frozenset(value.items()) if isinstance(value, dict) else value
                          for value in (getattr(self, name) for name in self.__dataclass_fields__)))

    def as_dict(self) -> dict:
        """The figures and the reason, as a plan and a case's record hold them; the hint is for the refusal that
        quotes the reason."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__ if name != "hint"}


def _ceil_to(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def _count(name: str, value) -> int:
    """`value`, an argument of `occupancy`, as an int of at least 0 (NumPy's integers too)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise WrongArgumentType(f"occupancy: {name} is a whole number, got {value!r} ({type(value).__name__})")
    if value < 0:     # no launch has fewer than none: a slip of the caller's, not a block to explain (errors.py)
        raise WrongArgumentValue(f"occupancy: {name} is at least 0, got {value}")
    return int(value)


def occupancy(limits: ArchLimits, threads_per_block: int, registers_per_thread: int,
              static_shared_bytes: int = 0, dynamic_shared_bytes: int = 0, *, barriers: int = 0) -> Occupancy:
    """Theoretical resident blocks per SM of a kernel launched with `threads_per_block` threads.

    `limits` is an `ArchLimits` (`arch_limits("sm_90")`, `limits_from_device`). `barriers` is the block barriers
    the kernel uses (ptxas's "used N barriers", `KernelResources.barriers`; 0 where unknown or none): from 9.x on
    an SM has a fixed number of them (`ArchLimits.barriers_per_sm`), so a kernel that uses many holds fewer blocks
    an SM, limited by "barriers". A block no SM can hold (no threads or more than the architecture allows, more
    registers per thread than it has, too much shared memory) gets 0 blocks and the `reason`, with a `hint` where
    there is a way out; a count below 0 is a `ValueError`, an argument of another kind a `WrongArgumentType`.
    """
    if not isinstance(limits, ArchLimits):
        raise WrongArgumentType(f"occupancy: limits is an ArchLimits (from arch_limits('sm_90') or "
                                f"limits_from_device), got {type(limits).__name__}")
    threads_per_block = _count("threads_per_block", threads_per_block)
    registers_per_thread = _count("registers_per_thread", registers_per_thread)
    static_shared_bytes = _count("static_shared_bytes", static_shared_bytes)
    dynamic_shared_bytes = _count("dynamic_shared_bytes", dynamic_shared_bytes)
    barriers = _count("barriers", barriers)
    warps = -(-threads_per_block // limits.warp_size)
    registers_per_warp = _ceil_to(max(registers_per_thread, 1) * limits.warp_size, limits.register_unit)
    # The hardware checks a block's registers as if its warps filled every sub-partition evenly.
    registers_checked_per_block = registers_per_warp * _ceil_to(max(warps, 1), limits.sub_partitions)
    shared_per_block = _ceil_to(static_shared_bytes + dynamic_shared_bytes + limits.reserved_shared_per_block,
                                limits.shared_unit)
    reason = hint = ""
    if threads_per_block < 1 or threads_per_block > limits.max_threads_per_block:
        reason = f"{threads_per_block} threads per block (1 to {limits.max_threads_per_block} allowed)"
    elif registers_per_thread > limits.max_registers_per_thread:
        reason = f"{registers_per_thread} registers per thread (at most {limits.max_registers_per_thread})"
    elif registers_checked_per_block > limits.registers_per_block:
        reason, hint = _rounded_registers_reason(limits, threads_per_block, registers_per_thread, registers_per_warp,
                                                 registers_checked_per_block)
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
    if barriers and limits.barriers_per_sm:
        by_limit["barriers"] = limits.barriers_per_sm // barriers
        if not by_limit["barriers"] and not reason:
            reason = (f"{barriers} block barriers (ptxas's \"used {barriers} barriers\") are more than the "
                      f"{limits.barriers_per_sm} an SM has on {limits.arch}")
    blocks = 0 if reason else min(by_limit.values())
    # A block with no shared memory at all (possible before 8.x, which has no reserve) is never limited by it.
    limiting = {name: value for name, value in by_limit.items() if name != "shared memory" or shared_per_block}
    limited_by = tuple(name for name, value in limiting.items() if value == blocks) if not reason else ()
    carveout = None
    if blocks:
        needed_kb = math.ceil(blocks * shared_per_block / KB)
        carveout = next((c for c in limits.shared_carveouts_kb if c >= needed_kb), None)
    return Occupancy(
        blocks_per_sm=blocks, limited_by=limited_by, limits=by_limit, warps_per_block=warps,
        active_warps=blocks * warps, occupancy=blocks * warps / limits.max_warps_per_sm,
        registers_per_warp=registers_per_warp, shared_per_block=shared_per_block,
        shared_carveout_kb=carveout, reason=reason, hint=hint,
    )


def _rounded_registers_reason(limits: ArchLimits, threads: int, registers_per_thread: int, registers_per_warp: int,
                              registers_checked: int) -> tuple[str, str]:
    """Why a block whose warps, rounded up to the sub-partitions, ask for more registers than a block may have
    cannot launch, and its hint: the two ways out, fewer warps or fewer registers a thread for the same block ("" where
    neither is open)."""
    warps = -(-threads // limits.warp_size)
    counted = _ceil_to(warps, limits.sub_partitions)
    most_warps = limits.registers_per_block // registers_per_warp // limits.sub_partitions * limits.sub_partitions
    per_warp = limits.registers_per_block // counted // limits.register_unit * limits.register_unit
    most_registers = per_warp // limits.warp_size
    ways = []
    if most_warps:
        ways.append(f"at most {most_warps} warps ({most_warps * limits.warp_size} threads) a block")
    if most_registers:
        ways.append(f"at most {most_registers} registers a thread, which __launch_bounds__({threads}) makes ptxas "
                    "keep to")
    return (f"{registers_checked} registers per block ({registers_per_thread} per thread, {warps} warps allocated "
            f"as {counted}: the hardware checks a block's registers as if its warps filled all "
            f"{limits.sub_partitions} schedulers of the SM evenly) exceed the {limits.registers_per_block} a block "
            f"may have: the launch would fail with CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", ", or ".join(ways))


BARRIERS_OF_A_RUNTIME_ID = 16   # ptxas counts every barrier of the block where a bar.sync's id is a register


def barrier_note(occupancy: Occupancy, barriers: int, limits: ArchLimits) -> str | None:
    """Why a kernel whose block barriers limit its blocks an SM holds so few (None where they do not): the
    barriers an SM has are shared by its blocks, and a ``bar.sync``/``bar.arrive`` whose barrier id is a register
    (CUTLASS's ``NamedBarrier``) makes ptxas count all 16 for the block."""
    by_barriers = occupancy.limits.get("barriers")
    others = [value for name, value in occupancy.limits.items() if name != "barriers"]
    if not barriers or by_barriers is None or not others or by_barriers >= min(others):
        return None
    note = (f"blocks an SM limited by barriers: an SM has {limits.barriers_per_sm} block barriers on {limits.arch} "
            f"and the kernel uses {barriers} a block, so {by_barriers} blocks fit whatever their size")
    if barriers >= BARRIERS_OF_A_RUNTIME_ID:
        note += ("; ptxas counts all 16 where a bar.sync or bar.arrive takes its barrier id from a register (as "
                 "CUTLASS's NamedBarrier does), while ids written as constants count only those named")
    return note


def waves(total_blocks: int, blocks_per_sm: int, sm_count: int) -> float:
    """How many full rounds of resident blocks the grid takes; the fraction is the tail wave's fill."""
    if blocks_per_sm <= 0 or sm_count <= 0:
        return math.inf
    return total_blocks / (blocks_per_sm * sm_count)


def cluster_waves(total_blocks: int, cluster_blocks: int, max_active_clusters: int) -> float:
    """`waves` counted in clusters: how many rounds of the clusters that fit at once (cuOccupancyMaxActiveClusters)
    the grid takes. A cluster's blocks must share one GPC, so where the SMs do not divide into clusters evenly
    fewer blocks fit at once in clusters than alone, and a grid sized by the SM count spills into a second wave."""
    if cluster_blocks <= 0 or max_active_clusters <= 0:
        return math.inf
    return total_blocks / cluster_blocks / max_active_clusters
