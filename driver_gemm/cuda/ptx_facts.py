"""What a kernel's PTX says about its TMA copies and its cluster, read without a GPU.

A kernel that copies through a tensor map names the map's rank in every instruction
(``cp.async.bulk.tensor.3d...``, ``cp.async.bulk.prefetch.tensor.2d...``,
``cp.reduce.async.bulk.tensor.2d...``); the map operand is a register that NVVM loads from the
kernel's parameter (``mov.b64 %rd1, f_param_0`` then ``cvta.param`` for a ``__grid_constant__``
map, ``ld.param.u64 %rd2, [f_param_1]`` for a ``const CUtensorMap*``). Following those moves
gives each instruction's parameter, so that a spec describing a rank-2 map for a kernel that
copies rank-3 boxes through it is refused before launch rather than faulting on the GPU. A
``__cluster_dims__`` kernel's entry carries ``.reqnctapercluster X, Y, Z``, and one whose ``__launch_bounds__`` has a
third argument (the most blocks a cluster may have) ``.maxclusterrank N``. A warp-specialised kernel's
``setmaxnreg.inc`` and ``.dec`` name the registers a thread asks for or gives back. A kernel that waits for its whole
grid (cooperative_groups' ``grid.sync()``) reads the grid's barrier workspace from ``%envreg1`` and ``%envreg2``,
which the driver fills only for a cooperative launch (without one the kernel traps). A kernel's ``extern __shared__``
array is a module-scope ``.extern .shared`` declaration that its code names. Which of the block's indices a kernel
reads (``%ctaid.x`` ... ``%ctaid.z``, a cluster's ``%clusterid``, ``%cluster_ctaid``, ``%cluster_ctarank``), in its
entry or in any function it calls, says on which grid axes its blocks differ: blocks along an axis it never reads
are copies of one another. What a kernel does with its cluster (`cluster_uses`: a TMA copy multicast to several of
its blocks, ``mapa`` addresses of another block's shared memory, a ``barrier.cluster``, its rank or its cluster's
size read) says whether it is written for a cluster of more than one block; a kernel that never reads the grid's
size (``%nctaid``) has no grid-stride loop over C's tiles. A module's scalar ``__constant__`` variable is declared
with its type (``.const .align 4 .f32 scale;``, ``.u32`` for an int), an array or a struct as bytes alone
(``.b8 table[64]``). A kernel's vector accesses of global memory (``ld.global.nc.v4.f32``, ``st.global.v2.f64``,
``.b128``, ``red.global...v4``, ``cp.async`` of 8 or 16 bytes, a bulk ``cp.async.bulk`` of global memory) name their
width, and the kernel parameter each address is made from is found by following the 64-bit moves and additions from
the ``ld.param`` of a pointer (`vector_accesses`); only the ``.global`` state space is read, and generic addresses
made from a pointer parameter, since a generic ``ld.v4`` of another address may as well be of shared or local memory.
Its scalar accesses of 2 to 8 bytes traced to a parameter (``ld.global.u32``, ``st.global.b64``, a 4-byte
``cp.async``: `scalar_accesses`) are kept the same way, since one moves several elements of a narrower type (two fp16
through a ``half2``). The low bits of an integer parameter the kernel tests (``and.b32 %r5, %r3, 3;``:
``K % 4 == 0``, as a kernel choosing its vector path at run time does) are kept with it
(`tested_multiples`), and so are those of an address made from a pointer parameter past the parameter itself
(``and.b64 %rd40, %rd39, 3;`` of ``A + row * K``: a kernel that reads a row two fp16 at a time only where the row is
4-byte aligned; `tested_addresses`). A tensor-core instruction names the types it multiplies
(``wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16``: bf16 A and B; `mma_types`), which a kernel reading A and B
of other types must reach through ``cvt`` instructions (`conversions`) or bit tricks; a kernel's writes of global memory
(``st.global``, ``red.global.add``, ``atom.global.add``, ``cp.async.bulk.global.shared::cta``) are traced to their
parameters as its vector accesses are (`global_writes`). The facts are kept beside the CUBIN (NVRTC hands out its
PTX with it); checks that use them: `planning.image_checks`, `planning.hopper_checks.cluster_use_checks`,
`planning.case_plan.literal_grid_check`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_ENTRY = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.entry\s+([\w$.]+)\s*\(", re.MULTILINE)
_CLUSTER = re.compile(r"\.reqnctapercluster\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
# __launch_bounds__ (.maxntid) and a required block (.reqntid) on an entry, as a CUBIN's attributes carry them.
_MAX_THREADS = re.compile(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
_REQUIRED_THREADS = re.compile(r"\.reqntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?")
# __launch_bounds__'s third argument, maxBlocksPerCluster: a launch with a larger cluster is refused by the driver.
_MAX_CLUSTER_RANK = re.compile(r"\.maxclusterrank\s+(\d+)")
_TMA = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:cp\.async\.bulk(?:\.prefetch)?|cp\.reduce\.async\.bulk)\.tensor\.(\d)d[\w.:]*)"
                  r"[^;]*?\[\s*([%\w$.]+)\s*,\s*\{", re.MULTILINE)
_PARAM_MOVE = re.compile(r"^\s*(?:mov|ld\.param)\.[us]?b?\d+\s+(%\w+)\s*,\s*\[?\s*([\w$.]+)_param_(\d+)\s*(?:\+\s*0\s*)?\]?\s*;",
                         re.MULTILINE)
_SETMAXNREG = re.compile(r"\bsetmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)\s*;")
# The grid workspace's address, which cooperative_groups reads (mov.u32 %r5, %envreg2;) before a grid-wide barrier.
_GRID_WORKSPACE = re.compile(r"%envreg[12]\b")
# Every function and entry of a module, from the line that names it (a .func may return: .func (.param ...) name(),
# and the functions a body calls (call.uni (retval0), name, (...); or call.uni name, (...);).
_FUNCTION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+|\.extern\s+)?\.(?:func|entry)\s+(?:\([^)]*\)\s*)?([\w$.]+)",
                       re.MULTILINE)
# A module-scope declaration (.extern .shared, .global, .const ...: a line outside every function body), and the
# dynamic shared memory a module declares (extern __shared__ float s[]; becomes .extern .shared .align 16 .b8 s[];).
_DECLARATION = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.(?:extern|global|const)\s+[^\n{]*;[ \t]*$", re.MULTILINE)
_DYNAMIC_SHARED = re.compile(r"^\s*\.extern\s+\.shared\s+[^;\n]*?([\w$]+)\s*\[\s*\]\s*;", re.MULTILINE)
_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?([\w$.]+)")
# The special registers that tell one block from another (mov.u32 %r1, %ctaid.y; a bare %ctaid is the whole vector).
_BLOCK_INDEX = re.compile(r"%(ctaid|clusterid|cluster_ctaid)(?:\.([xyz]))?(?![\w$])|%(cluster_ctarank)(?![\w$])")
# A call through a register (a function pointer), whose callee the module does not name.
_INDIRECT_CALL = re.compile(r"\bcall(?:\.uni)?\s+(?:\([^)]*\)\s*,\s*)?%")
_EXTERN_FUNCTION = re.compile(r"^\s*\.extern\s+\.func\s+(?:\([^)]*\)\s*)?([\w$.]+)", re.MULTILINE)
# Functions of the CUDA runtime a kernel may call without them being in its module, none of which reads the block's
# place: printf's, assert's, device malloc's.
# What a kernel does with its cluster, by the name `KernelPtxFacts.cluster_uses` gives each: a copy into the shared
# memory of several blocks (cp.async.bulk...multicast::cluster), another block's shared memory addressed (mapa), a
# barrier of the whole cluster, the block's rank or place in its cluster read, and the cluster's size read (a kernel
# that reads it can be written for any cluster, one block included).
CLUSTER_USES = {
    "multicast": re.compile(r"\.multicast::cluster\b"),
    "mapa": re.compile(r"\bmapa(?:\.shared::cluster)?\.u(?:32|64)\b"),
    "barrier.cluster": re.compile(r"\bbarrier\.cluster\.(?:arrive|wait)\b"),
    "rank": re.compile(r"%cluster_(?:ctarank|ctaid)(?![\w$])"),
    "size": re.compile(r"%cluster_(?:nctarank|nctaid)(?![\w$])"),
}
# The grid's size (gridDim, in blocks or clusters), which a kernel looping over more tiles than its blocks reads to
# step from one tile to its next (tile += gridDim.x).
_GRID_SIZE = re.compile(r"%(?:nctaid|nclusterid)(?![\w$])")
_RUNTIME_FUNCTIONS = frozenset({"vprintf", "__assertfail", "malloc", "free"})
# A module's scalar __constant__ variable with its type (.const .align 4 .f32 _ZN3lut5scaleE = 0f3F800000;); an
# array's or a struct's declaration names bytes and an extent (.b8 table[64]), which this leaves out.
_SCALAR_CONSTANT = re.compile(r"^\s*(?:\.visible\s+|\.weak\s+)?\.const\s+(?:\.align\s+\d+\s+)?\.([bfsu]\d+)\s+"
                              r"([\w$]+)\s*(?:=[^;\n]*)?;", re.MULTILINE)
# An access of global memory that may be a vector (ld.global.nc.v4.f32 {%f1, ...}, [%rd7+16]; st.global.v2.f64 [%rd3],
# {...}; red.global.add.v4.f32 [%rd2], {...}; ld.global.b128): its opcode's qualifiers and its first address; an inline
# asm block of a CUDA header opens on the instruction's line ({ atom.add.noftz.f16x2 %r3,[%rd2],%r2; }).
_GLOBAL_ACCESS = re.compile(r"^\s*(?:\{\s*)?(?:@!?%\w+\s+)?((ldu?|st|red|atom)(?:\.[\w:]+)+)\s+[^;]*?\[\s*(%?[\w$.]+)",
                            re.MULTILINE)
# .v4.f32 (4 x 32 bits), .v2.f16x2 (2 x 2 x 16), .v2.b64; a scalar .b128 moves 16 bytes at once.
_VECTOR_TYPE = re.compile(r"\.v(2|4|8)\.(?:bf|[bfsu])(\d+)(?:x(\d))?(?![\w])")
_WIDE_SCALAR = re.compile(r"\.b128(?![\w])")
# A scalar access's type, its opcode's last qualifier (ld.global.u32: 4 bytes; red.global.add.noftz.f16x2: a pair of 2).
_SCALAR_TYPE = re.compile(r"\.(?:bf|[bfsu])(16|32|64)(?:x(2))?$")
_STATE_SPACES = frozenset({"global", "shared", "local", "param", "const"})
# cp.async.cg.shared.global [%r5], [%rd7], 16, %r9; (the copy's bytes after the two addresses), and a bulk copy's
# global side (cp.async.bulk.shared::cluster.global... [dst], [src], size, [mbar]; cp.async.bulk.global.shared::cta
# [dst], [src], size): its addresses must be 16-byte aligned. A copy through a tensor map (.tensor) is not one.
_ASYNC_COPY = re.compile(r"^\s*(?:@!?%\w+\s+)?(cp\.async\.(?:ca|cg)\.shared(?:::cta|::cluster)?\.global[\w.:]*)\s+"
                         r"\[[^\]]*\]\s*,\s*\[\s*(%?[\w$.]+)[^\]]*\]\s*,\s*(\d+)", re.MULTILINE)
_BULK_COPY = re.compile(r"^\s*(?:@!?%\w+\s+)?(cp\.async\.bulk\.(?!tensor|prefetch)([\w:]+)\.([\w:]+)[\w.:]*)\s+"
                        r"\[\s*(%?[\w$.]+)[^\]]*\]\s*,\s*\[\s*(%?[\w$.]+)", re.MULTILINE)
BULK_COPY_ALIGNMENT = 16   # a non-tensor bulk copy's global address is 16-byte aligned (PTX ISA, cp.async.bulk)
# How an address is made from a pointer parameter: loaded (ld.param.u64 %rd1, [f_param_0];), or named (mov.b64 %rd1,
# f_param_0; for a __grid_constant__ parameter), then moved, converted to the global space and added to; a
# multiply-add adds its last operand (mad.wide.s32 %rd5, %r2, 4, %rd1;), a subtraction takes from its first.
_POINTER_PARAM = re.compile(r"^\s*(?:ld\.param\.[bsu]64\s+(%\w+)\s*,\s*\[\s*([\w$.]+)_param_(\d+)\s*\]|"
                            r"mov\.[bu]64\s+(%\w+)\s*,\s*([\w$.]+)_param_(\d+))\s*;", re.MULTILINE)
_POINTER_STEP = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:(mov|cvta(?:\.to)?\.global|add|sub|mad\.lo|selp)\.[bsu]64|"
                           r"(mad)\.wide\.[su]32)\s+(%\w+)\s*,\s*([^;]*);", re.MULTILINE)
# An integer parameter loaded (ld.param.u32 %r3, [f_param_5];), moved, converted or or-ed with another, then its low
# bits tested: and.b32 %r7, %r3, 3; (K % 4 == 0, a kernel picking its 16-byte path at run time) or rem.u32 by 4.
_INTEGER_PARAM = re.compile(r"^\s*ld\.param\.[bsu](?:8|16|32|64)\s+(%\w+)\s*,\s*"
                            r"\[\s*([\w$.]+)_param_(\d+)\s*\]\s*;", re.MULTILINE)
_INTEGER_STEP = re.compile(r"^\s*(?:@!?%\w+\s+)?(?:mov\.[bsu](?:32|64)|cvt\.[su](?:32|64)\.[su](?:32|64)|"
                           r"or\.b(?:32|64))\s+(%\w+)\s*,\s*([^;]*);", re.MULTILINE)
_LOW_BITS_TEST = re.compile(r"^\s*(?:@!?%\w+\s+)?(and\.b(?:32|64)|rem\.[su](?:32|64))\s+%\w+\s*,\s*(%\w+)\s*,\s*"
                            r"(\d+)\s*;", re.MULTILINE)
_REGISTER = re.compile(r"%\w+")
_REGISTER_MOVE = re.compile(r"^\s*(?:mov|cvta(?:\.to)?\.(?:param|global|const)|add)\.[usb]?\d+\s+(%\w+)\s*,\s*(%\w+)\b",
                            re.MULTILINE)
# A tensor-core instruction (wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16, mma.sync.aligned.m16n8k8.row.col.
# f32.tf32.tf32.f32, wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32, their sparse .sp forms) names its operands' types
# after its shape: wgmma's D, A, B; mma's and wmma's D, A, B, C, or wmma's D and C alone for f16 inputs.
_MMA = re.compile(r"^\s*(?:\{\s*)?(?:@!?%\w+\s+)?((?:wgmma\.mma_async|wmma\.mma|mma)(?:\.[\w:]+)+)\s", re.MULTILINE)
MMA_INPUT_TYPES = frozenset({"f16", "bf16", "tf32", "f32", "f64", "e4m3", "e5m2", "e3m2", "e2m3", "e2m1", "s8", "u8",
                             "s4", "u4", "b1", "s32"})
# A conversion (cvt.rn.bf16x2.f32, cvt.rn.f16x2.e4m3x2, cvt.rna.tf32.f32): the formats it names, pairs as one.
_CONVERSION = re.compile(r"\bcvt((?:\.[\w:]+)+)")
# A write of global memory (st.global.f32, red.global.add.f32, atom.global.add.f32, a generic atom.add.f32) whose
# address is the operand in brackets after the opcode (an atom's destination register comes first); an inline asm
# block of a CUDA header may open on the instruction's line.
_GLOBAL_WRITE = re.compile(r"^\s*(?:\{\s*)?(?:@!?%\w+\s+)?((st|red|atom)(?:\.[\w:]+)+)\s+[^;]*?\[\s*(%?[\w$.]+)",
                           re.MULTILINE)
# A bulk copy of shared memory into global memory (cp.async.bulk.global.shared::cta.bulk_group [dst], [src], size;) and
# its reducing form (cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 ...): a store, and an add, of the
# bytes at its destination. A copy through a tensor map (.tensor) names its map, not an address.
_BULK_WRITE = re.compile(r"^\s*(?:@!?%\w+\s+)?((?:cp\.async|cp\.reduce\.async)\.bulk\.global\.shared[\w.:]*)\s+"
                         r"\[\s*(%?[\w$.]+)", re.MULTILINE)


@dataclass(frozen=True)
class TmaCopy:
    """One TMA instruction: its rank, its text, and the kernel parameter (0-based) its map comes from (None:
    not traced)."""

    rank: int
    instruction: str
    param: int | None


@dataclass(frozen=True)
class VectorAccess:
    """One kind of access of global memory a kernel makes that may move more than one element of a matrix: a vector
    access (``ld.global.nc.v4.f32``) or a scalar one wider than the matrix's element (``ld.global.u32`` of fp16 data:
    two elements). A load or a store (`store`: a store, a reduction or an atomic), its bytes (`width`), its
    instruction as the PTX writes it, and the kernel parameters (0-based) its address is made from, ascending (empty:
    not traced to one, as an address read from memory or made in a function the kernel calls)."""

    store: bool
    width: int
    instruction: str
    params: tuple[int, ...] = ()


@dataclass(frozen=True)
class KernelPtxFacts:
    """A kernel's TMA instructions, its compile-time cluster (None without ``__cluster_dims__``), the register counts
    its ``setmaxnreg`` instructions move threads to (``inc`` and ``dec``, each value once, ascending), whether it
    reads the grid workspace of a cooperative launch (`grid_sync`), whether it uses dynamic shared memory (``extern
    __shared__``: `dynamic_shared`), whose size only the launch gives, and its entry's ``.maxntid`` and ``.reqntid``
    (`max_threads`, `required_threads`: what a PTX image says of its block before the driver compiles it) and
    ``.maxclusterrank`` (`max_cluster_blocks`: the most blocks a cluster of its launch may have,
    ``__launch_bounds__``'s third argument; None without one), and the block indices it reads (`block_reads`:
    ``ctaid.x``, ``clusterid.y``, ``cluster_ctarank``..., sorted; None where unknown: a call the module does not
    resolve, or facts not read from PTX), and what it does with its cluster (`cluster_uses`: names of
    `CLUSTER_USES`, sorted; None where unknown, as `block_reads`), and whether it reads the grid's size
    (`reads_grid_size`: ``%nctaid``, ``%nclusterid``; None where unknown), and the PTX type of each scalar
    ``__constant__`` variable of its module (`constant_types`: symbol and type, ``("_ZN3lut5scaleE", "f32")``,
    sorted; None where unknown), its vector accesses of global memory (`vector_accesses`: one `VectorAccess` for
    each instruction, width and parameters, sorted; None where unknown) and the multiples its integer parameters are
    tested for (`tested_multiples`: parameter and multiple, ``(5, 4)`` for ``and.b32 %r7, %r3, 3`` of parameter 5,
    sorted; None where unknown), its tensor-core instructions with the input types each names (`mma_types`:
    instruction, A's type and B's, ``("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", "bf16", "bf16")``, one
    for each instruction, sorted), the formats its ``cvt`` instructions convert to and from (`conversions`:
    ``("f16", "e4m3")`` for ``cvt.rn.f16x2.e4m3x2``, a pair such as ``f16x2`` as its element, sorted) and its
    writes of global memory (`global_writes`: each store, reduction, atomic or bulk copy into global memory with the
    kernel parameters its address is made from, as `VectorAccess.params`, sorted); each of these three None where
    unknown (a call the module does not resolve).
    The lines of ptxas's log saying it ignored ``setmaxnreg`` (`setmaxnreg_ignored`: code, text, and how many kernels
    of the program using setmaxnreg the line may be of, 1 where it is this kernel's alone; None where no compile log
    was read) come from the compile (`attach_ignored_setmaxnreg`). `block_reads`, `cluster_uses`, `reads_grid_size`,
    `constant_types`, `vector_accesses`, `tested_multiples`, `mma_types`, `conversions`, `global_writes` and
    `setmaxnreg_ignored` are left out of equality: they describe the code, not the launch the other facts
    constrain. So are its scalar accesses of global memory of 2 to 8 bytes traced to a parameter (`scalar_accesses`:
    ``ld.global.u32``, ``st.global.b64``, a 4-byte ``cp.async``, as `VectorAccess`, sorted; None where unknown), each
    of which moves several elements of a narrower type (two fp16 in one ``ld.global.u32``), and the multiples of
    bytes it tests addresses made from its pointer parameters for (`tested_addresses`: parameter and multiple,
    ``(0, 4)`` for ``and.b64 %rd40, %rd39, 3`` of a row of parameter 0, sorted; None where unknown)."""

    copies: tuple[TmaCopy, ...] = ()
    cluster: tuple[int, int, int] | None = None
    register_increases: tuple[int, ...] = ()
    register_decreases: tuple[int, ...] = ()
    grid_sync: bool = False
    dynamic_shared: bool = False
    max_threads: tuple[int, int, int] | None = None
    required_threads: tuple[int, int, int] | None = None
    max_cluster_blocks: int | None = None
    block_reads: tuple[str, ...] | None = field(default=None, compare=False)
    cluster_uses: tuple[str, ...] | None = field(default=None, compare=False)
    reads_grid_size: bool | None = field(default=None, compare=False)
    constant_types: tuple[tuple[str, str], ...] | None = field(default=None, compare=False)
    vector_accesses: tuple[VectorAccess, ...] | None = field(default=None, compare=False)
    tested_multiples: tuple[tuple[int, int], ...] | None = field(default=None, compare=False)
    mma_types: tuple[tuple[str, str, str], ...] | None = field(default=None, compare=False)
    conversions: tuple[tuple[str, str], ...] | None = field(default=None, compare=False)
    global_writes: tuple[tuple[str, tuple[int, ...]], ...] | None = field(default=None, compare=False)
    setmaxnreg_ignored: tuple[tuple[str, str, int], ...] | None = field(default=None, compare=False)
    scalar_accesses: tuple[VectorAccess, ...] | None = field(default=None, compare=False)
    tested_addresses: tuple[tuple[int, int], ...] | None = field(default=None, compare=False)

    def widest_access(self, store: bool) -> VectorAccess | None:
        """The widest vector load (or store, `store`) of global memory; None where it makes none or they are
        unknown."""
        accesses = [access for access in self.vector_accesses or () if access.store == store]
        return max(accesses, key=lambda access: access.width) if accesses else None

    def warpgroup_instructions(self) -> tuple[str, ...]:
        """One instruction of each kind the kernel executes by whole warpgroups (4 warps, ``.sync.aligned``): a
        ``wgmma.mma_async`` and a ``setmaxnreg``; empty where it has none (or its tensor-core instructions are
        unknown and it moves no registers)."""
        found = [instruction for instruction, _, _ in self.mma_types or () if instruction.startswith("wgmma.")][:1]
        for kind, counts in (("inc", self.register_increases), ("dec", self.register_decreases)):
            if counts:
                found.append(f"setmaxnreg.{kind}.sync.aligned.u32 {max(counts) if kind == 'inc' else min(counts)}")
        return tuple(found)

    def warp_instructions(self) -> tuple[str, ...]:
        """One instruction of each kind the kernel executes by whole warps (32 lanes, ``.sync.aligned``): a
        ``wmma.mma`` and an ``mma.sync`` (``mma.sp`` included), read from its tensor-core instructions (`mma_types`);
        empty where it has none or they are unknown. The loads and stores that feed them (``wmma.load``,
        ``ldmatrix``, ``stmatrix``, ``movmatrix``), warp-wide as well, are not among the facts kept: a GEMM that
        executes them executes the instruction they feed."""
        found: dict[str, str] = {}
        for instruction, _, _ in self.mma_types or ():
            kind = instruction.split(".", 1)[0]
            if kind in ("wmma", "mma"):
                found.setdefault(kind, instruction)
        return tuple(found.values())

    def reads_block_axis(self, axis: int) -> bool | None:
        """Whether the kernel tells its blocks apart along grid axis `axis` (0 for x): it reads their index on that
        axis, directly or as a cluster's (``%clusterid``, ``%cluster_ctaid``), or its rank in its cluster, which
        differs on every axis a cluster spans. None where its reads are unknown."""
        if self.block_reads is None:
            return None
        suffix = "." + "xyz"[axis]
        return any(name == "cluster_ctarank" or "." not in name or name.endswith(suffix) for name in self.block_reads)

    def ranks_for(self, param: int) -> dict[int, str]:
        """Rank -> one instruction of that rank, for the copies that read parameter `param`; when no copy could
        be traced to any parameter, every copy's."""
        traced = [copy for copy in self.copies if copy.param is not None]
        chosen = [copy for copy in traced if copy.param == param] if traced else list(self.copies)
        return {copy.rank: copy.instruction for copy in chosen}

    def as_dict(self) -> dict[str, Any]:
        return {"copies": [[copy.rank, copy.instruction, copy.param] for copy in self.copies],
                "cluster": list(self.cluster) if self.cluster else None,
                "setmaxnreg": {"inc": list(self.register_increases), "dec": list(self.register_decreases)},
                "grid_sync": self.grid_sync, "dynamic_shared": self.dynamic_shared,
                "max_threads": list(self.max_threads) if self.max_threads else None,
                "required_threads": list(self.required_threads) if self.required_threads else None,
                "max_cluster_blocks": self.max_cluster_blocks,
                "block_reads": list(self.block_reads) if self.block_reads is not None else None,
                "cluster_uses": list(self.cluster_uses) if self.cluster_uses is not None else None,
                "reads_grid_size": self.reads_grid_size,
                "constant_types": ([list(pair) for pair in self.constant_types] if self.constant_types is not None
                                   else None),
                "vector_accesses": ([[access.store, access.width, access.instruction, list(access.params)]
                                     for access in self.vector_accesses] if self.vector_accesses is not None
                                    else None),
                "tested_multiples": ([list(pair) for pair in self.tested_multiples]
                                     if self.tested_multiples is not None else None),
                "mma_types": [list(entry) for entry in self.mma_types] if self.mma_types is not None else None,
                "conversions": ([list(pair) for pair in self.conversions] if self.conversions is not None
                                else None),
                "global_writes": ([[instruction, list(params)] for instruction, params in self.global_writes]
                                  if self.global_writes is not None else None),
                "setmaxnreg_ignored": ([list(line) for line in self.setmaxnreg_ignored]
                                       if self.setmaxnreg_ignored is not None else None),
                "scalar_accesses": ([[access.store, access.width, access.instruction, list(access.params)]
                                     for access in self.scalar_accesses] if self.scalar_accesses is not None
                                    else None),
                "tested_addresses": ([list(pair) for pair in self.tested_addresses]
                                     if self.tested_addresses is not None else None)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "KernelPtxFacts":
        cluster = data.get("cluster")
        moves = data.get("setmaxnreg") or {}
        return cls(tuple(TmaCopy(int(rank), str(text), None if param is None else int(param))
                         for rank, text, param in data.get("copies", ())),
                   (int(cluster[0]), int(cluster[1]), int(cluster[2])) if cluster else None,
                   tuple(int(v) for v in moves.get("inc", ())), tuple(int(v) for v in moves.get("dec", ())),
                   bool(data.get("grid_sync", False)), bool(data.get("dynamic_shared", False)),
                   _triple_of(data.get("max_threads")), _triple_of(data.get("required_threads")),
                   None if data.get("max_cluster_blocks") is None else int(data["max_cluster_blocks"]),
                   None if data.get("block_reads") is None else tuple(str(name) for name in data["block_reads"]),
                   None if data.get("cluster_uses") is None else tuple(str(name) for name in data["cluster_uses"]),
                   None if data.get("reads_grid_size") is None else bool(data["reads_grid_size"]),
                   None if data.get("constant_types") is None else tuple((str(symbol), str(ptx_type))
                                                                       for symbol, ptx_type in data["constant_types"]),
                   None if data.get("vector_accesses") is None else tuple(
                       VectorAccess(bool(store), int(width), str(instruction), tuple(int(p) for p in params))
                       for store, width, instruction, params in data["vector_accesses"]),
                   None if data.get("tested_multiples") is None else tuple(
                       (int(param), int(multiple)) for param, multiple in data["tested_multiples"]),
                   None if data.get("mma_types") is None else tuple(
                       (str(instruction), str(a_type), str(b_type))
                       for instruction, a_type, b_type in data["mma_types"]),
                   None if data.get("conversions") is None else tuple(
                       (str(destination), str(source)) for destination, source in data["conversions"]),
                   None if data.get("global_writes") is None else tuple(
                       (str(instruction), tuple(int(p) for p in params))
                       for instruction, params in data["global_writes"]),
                   None if data.get("setmaxnreg_ignored") is None else tuple(
                       (str(code), str(text), int(kernels)) for code, text, kernels in data["setmaxnreg_ignored"]),
                   scalar_accesses=None if data.get("scalar_accesses") is None else tuple(
                       VectorAccess(bool(store), int(width), str(instruction), tuple(int(p) for p in params))
                       for store, width, instruction, params in data["scalar_accesses"]),
                   tested_addresses=None if data.get("tested_addresses") is None else tuple(
                       (int(param), int(multiple)) for param, multiple in data["tested_addresses"]))


def _triple_of(values) -> tuple[int, int, int] | None:
    return (int(values[0]), int(values[1]), int(values[2])) if values else None


def _threads(pattern: re.Pattern, header: str) -> tuple[int, int, int] | None:
    """The X, Y, Z of an entry directive in `header` (missing ones 1); None where the entry has none."""
    match = pattern.search(header)
    return tuple(int(v) if v else 1 for v in match.groups()) if match else None   # type: ignore[return-value]


def _split(text: str, heads: re.Pattern) -> dict[str, str]:
    """`text` cut where `heads` match, by the name each head gives: from a head to the next."""
    starts = [(match.start(), match.group(1)) for match in heads.finditer(text)]
    return {name: text[start:(starts[i + 1][0] if i + 1 < len(starts) else len(text))]
            for i, (start, name) in enumerate(starts)}


def _bodies(ptx: str) -> dict[str, str]:
    """Each entry's text, from its ``.entry`` line to the next entry."""
    return _split(ptx, _ENTRY)


class _CallGraph:
    """A module's functions and entries, each with its code and the functions it calls. Module-scope declarations
    are left out, so that an ``.extern .shared`` line is not taken for a use."""

    def __init__(self, ptx: str):
        self.bodies = _split(_DECLARATION.sub("", ptx), _FUNCTION)
        self.calls = {name: set(_CALL.findall(body)) for name, body in self.bodies.items()}
        # A function only declared (.extern .func: defined in another module, linked later) has no code here.
        declared = set(_EXTERN_FUNCTION.findall(ptx))
        defined = {match.group(1) for match in _FUNCTION.finditer(ptx)
                   if not match.group(0).lstrip().startswith(".extern")}
        self.unresolved = declared - defined - _RUNTIME_FUNCTIONS

    def reaching(self, pattern: re.Pattern) -> frozenset[str]:
        """The functions and entries whose code matches `pattern`, themselves or through the functions they call:
        a grid-wide barrier left out of line (as a debug build leaves it) is reached by a ``call``."""
        found = {name for name, body in self.bodies.items() if pattern.search(body)}
        while True:
            more = {name for name, callees in self.calls.items() if name not in found and callees & found}
            if not more:
                return frozenset(found)
            found |= more

    def reached(self, entry: str) -> set[str] | None:
        """`entry` and every function it calls, directly or not; None where it calls through a pointer or calls a
        function defined in another module, whose code is unknown."""
        seen: set[str] = set()
        waiting = [entry]
        while waiting:
            name = waiting.pop()
            if name in seen:
                continue
            if name in self.unresolved or name not in self.bodies and name not in _RUNTIME_FUNCTIONS:
                return None
            seen.add(name)
            body = self.bodies.get(name, "")
            if _INDIRECT_CALL.search(body):
                return None
            waiting.extend(self.calls.get(name, ()))
        return seen

    def block_reads(self, entry: str) -> tuple[str, ...] | None:
        """The block indices (`KernelPtxFacts.block_reads`) that `entry` and the functions it calls read; None where
        their code is unknown (`reached`)."""
        seen = self.reached(entry)
        if seen is None:
            return None
        found: set[str] = set()
        for name in seen:
            for vector, axis, rank in _BLOCK_INDEX.findall(self.bodies.get(name, "")):
                found.add(rank or (f"{vector}.{axis}" if axis else vector))
        return tuple(sorted(found))

    def cluster_uses(self, entry: str) -> tuple[str, ...] | None:
        """What `entry` and the functions it calls do with their cluster (`KernelPtxFacts.cluster_uses`); None where
        their code is unknown (`reached`)."""
        seen = self.reached(entry)
        if seen is None:
            return None
        return tuple(sorted(use for use, pattern in CLUSTER_USES.items()
                            if any(pattern.search(self.bodies.get(name, "")) for name in seen)))

    def vector_accesses(self, entry: str) -> tuple[VectorAccess, ...]:
        """The vector accesses of global memory of `entry`, traced to its parameters, and of the functions it calls
        (untraced); where those are unknown (`reached`), the entry's own."""
        found = vector_accesses(entry, self.bodies.get(entry, ""))
        for name in (self.reached(entry) or set()) - {entry}:
            found |= vector_accesses(name, self.bodies.get(name, ""), traced=False)
        return tuple(sorted(found, key=lambda access: (access.store, access.width, access.instruction,
                                                       access.params)))

    def reads_grid_size(self, entry: str) -> bool | None:
        """Whether `entry` or a function it calls reads the grid's size; None where their code is unknown."""
        seen = self.reached(entry)
        if seen is None:
            return None
        return any(_GRID_SIZE.search(self.bodies.get(name, "")) for name in seen)

    def mma_types(self, entry: str) -> tuple[tuple[str, str, str], ...] | None:
        """The tensor-core instructions of `entry` and the functions it calls (`KernelPtxFacts.mma_types`); None where
        their code is unknown."""
        seen = self.reached(entry)
        if seen is None:
            return None
        return tuple(sorted({found for name in seen for found in mma_types(self.bodies.get(name, ""))}))

    def conversions(self, entry: str) -> tuple[tuple[str, str], ...] | None:
        """The formats the ``cvt`` instructions of `entry` and the functions it calls convert to and from; None
        where their code is unknown."""
        seen = self.reached(entry)
        if seen is None:
            return None
        return tuple(sorted({pair for function in seen for pair in conversions(self.bodies.get(function, ""))}))

    def global_writes(self, entry: str) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
        """The writes of global memory of `entry`, traced to its parameters, and of the functions it calls
        (untraced); None where their code is unknown."""
        seen = self.reached(entry)
        if seen is None:
            return None
        found = global_writes(entry, self.bodies.get(entry, ""))
        for name in seen - {entry}:
            found |= global_writes(name, self.bodies.get(name, ""), traced=False)
        return tuple(sorted(found))


def _operands(text: str) -> list[str]:
    return [operand.strip() for operand in text.split(",")]


def _settle(origin: dict[str, frozenset[int]], steps: list[tuple[str, list[str]]]) -> dict[str, frozenset[int]]:
    """`origin` grown along `steps` (a register and the registers it is made from) until it no longer changes: PTX
    registers may be written before the line that reads them (a loop), so one pass is not enough."""
    for _ in range(64):    # a chain of moves settles in as many passes as it is long; longer ones stay partial
        changed = False
        for register, sources in steps:
            found = origin.get(register, frozenset()).union(*(origin[source] for source in sources if source in origin))
            if found != origin.get(register, frozenset()):
                origin[register] = found
                changed = True
        if not changed:
            break
    return origin


def _pointer_steps(body: str) -> list[tuple[str, list[str], bool]]:
    """Each 64-bit step of `body` that may carry an address (`_POINTER_STEP`): the register it writes, the registers
    the address comes from, and whether it only moves it (a ``mov`` or a ``cvta``, no offset added)."""
    steps = []
    for match in _POINTER_STEP.finditer(body):
        step, multiply_add, register, operands = match.groups()
        sources = _operands(operands)
        if multiply_add or step in ("mad.lo",):
            sources = sources[-1:]          # the addend: a + b * c moves the address c
        elif step == "sub":
            sources = sources[:1]
        elif step == "selp":
            sources = sources[:2]
        moved = step is not None and (step == "mov" or step.startswith("cvta"))
        steps.append((register, [source for source in sources if _REGISTER.fullmatch(source)], moved))
    return steps


def _pointer_origins(name: str, body: str) -> dict[str, frozenset[int]]:
    """The parameters of entry `name` each 64-bit register of `body` holds an address from (`_POINTER_STEP`)."""
    origin: dict[str, frozenset[int]] = {}
    for match in _POINTER_PARAM.finditer(body):
        register, function, param = match.group(1, 2, 3) if match.group(1) else match.group(4, 5, 6)
        if function == name:
            origin[register] = origin.get(register, frozenset()) | {int(param)}
    return _settle(origin, [(register, sources) for register, sources, _ in _pointer_steps(body)])


def tested_multiples(name: str, body: str) -> tuple[tuple[int, int], ...]:
    """The integer parameters of entry `name` whose low bits `body` tests, each with the multiple the test tells
    (``and.b32 %r7, %r3, 3;`` of a parameter: whether it is a multiple of 4), sorted."""
    origin: dict[str, frozenset[int]] = {}
    for match in _INTEGER_PARAM.finditer(body):
        if match.group(2) == name:
            origin[match.group(1)] = origin.get(match.group(1), frozenset()) | {int(match.group(3))}
    if not origin:
        return ()
    steps = [(match.group(1), [source for source in _operands(match.group(2)) if _REGISTER.fullmatch(source)])
             for match in _INTEGER_STEP.finditer(body)]
    _settle(origin, steps)
    return tuple(sorted(_low_bits_tests(body, origin)))


def _low_bits_tests(body: str, origin: dict[str, frozenset[int]]) -> set[tuple[int, int]]:
    """Each parameter of `origin` whose register `body` tests the low bits of (``and.b32 %r7, %r3, 3;`` or
    ``rem.u32 %r7, %r3, 4;``), with the multiple the test tells (4)."""
    found: set[tuple[int, int]] = set()
    for match in _LOW_BITS_TEST.finditer(body):
        operation, register, value = match.group(1), match.group(2), int(match.group(3))
        multiple = value + 1 if operation.startswith("and") else value
        if multiple < 2 or multiple & (multiple - 1):     # a mask of low bits (3, 7, 15) or a power of two
            continue
        found.update((param, multiple) for param in origin.get(register, ()))
    return found


def tested_addresses(name: str, body: str) -> tuple[tuple[int, int], ...]:
    """The pointer parameters of entry `name` an address made from which, past the parameter itself (a row's:
    ``A + row * K``), `body` tests the low bits of (``and.b64 %rd40, %rd39, 3;``, or of its low 32 bits), each with
    the multiple of bytes the test tells (4), sorted: a kernel that does takes its wide accesses only where that
    address is aligned for them. A test of the bare parameter is left out, since it says nothing of a later row."""
    origin = _pointer_origins(name, body)
    steps = _pointer_steps(body)
    # an address with an offset added, then moved, narrowed to its low 32 bits or or-ed with another
    offset = {register: origin[register] for register, sources, moved in steps
              if not moved and register in origin and any(source in origin for source in sources)}
    _settle(offset, [(register, sources) for register, sources, moved in steps if moved])
    _settle(offset, [(match.group(1), [source for source in _operands(match.group(2)) if _REGISTER.fullmatch(source)])
                     for match in _INTEGER_STEP.finditer(body)])
    return tuple(sorted(_low_bits_tests(body, offset)))


def _access_width(opcode: str) -> tuple[int, bool] | None:
    """The bytes an access moves and whether it is a vector one: a vector access (``ld.global.nc.v4.f32``: 16) or a
    128-bit one (``.b128``), or a scalar one of 2 to 8 bytes (``ld.global.u32``: 4, ``red.global.add.noftz.f16x2``:
    4); None for a byte's or an untyped one."""
    vector = _VECTOR_TYPE.search(opcode)
    if vector is not None:
        return int(vector.group(1)) * int(vector.group(2)) * int(vector.group(3) or 1) // 8, True
    if _WIDE_SCALAR.search(opcode):
        return 16, True
    scalar = _SCALAR_TYPE.search(opcode)
    return (int(scalar.group(1)) * int(scalar.group(2) or 1) // 8, False) if scalar is not None else None


def _global_accesses(name: str, body: str, traced: bool) -> tuple[set[VectorAccess], set[VectorAccess]]:
    """The vector accesses of global memory in `body` and its scalar ones of 2 to 8 bytes (a 4-byte ``cp.async``
    among them), each with the parameters of entry `name` its address is made from where `traced`."""
    origin = _pointer_origins(name, body) if traced else {}
    vectors: set[VectorAccess] = set()
    scalars: set[VectorAccess] = set()

    def add(found: set[VectorAccess], store: bool, width: int, instruction: str, address: str) -> None:
        found.add(VectorAccess(store, width, instruction, tuple(sorted(origin.get(address, ())))))

    for match in _GLOBAL_ACCESS.finditer(body):
        opcode, operation, address = match.groups()
        width = _access_width(opcode)
        spaces = {token.split("::")[0] for token in opcode.split(".")} & _STATE_SPACES
        # a generic address made from a pointer parameter is global memory (cuda_fp16.hpp's half2 atomicAdd is a
        # generic atom.add.noftz.f16x2); one made otherwise may be of shared or local memory
        if width is not None and (spaces == {"global"} or not spaces and origin.get(address)):
            add(vectors if width[1] else scalars, operation in ("st", "red", "atom"), width[0], opcode, address)
    for match in _ASYNC_COPY.finditer(body):
        # 8 or 16 bytes are a vector's; 4 bytes are one fp32 element, or two fp16 ones
        add(vectors if int(match.group(3)) > 4 else scalars, False, int(match.group(3)), match.group(1),
            match.group(2))
    for match in _BULK_COPY.finditer(body):
        opcode, destination_space, source_space, destination, source = match.groups()
        if source_space == "global":
            add(vectors, False, BULK_COPY_ALIGNMENT, opcode, source)
        elif destination_space == "global":
            add(vectors, True, BULK_COPY_ALIGNMENT, opcode, destination)
    return vectors, scalars


def vector_accesses(name: str, body: str, traced: bool = True) -> set[VectorAccess]:
    """The vector accesses of global memory in `body`, each with the parameters of entry `name` its address is made
    from where `traced` (the body is the entry's own; a function it calls has parameters of its own)."""
    return _global_accesses(name, body, traced)[0]


def scalar_accesses(name: str, body: str) -> tuple[VectorAccess, ...]:
    """The scalar accesses of global memory of 2 to 8 bytes in the body of entry `name` (``ld.global.u32``,
    ``st.global.b64``, ``cp.async`` of 4 bytes) whose address is made from its parameters, sorted: each moves several
    elements of a matrix of a narrower type (two fp16 in one ``ld.global.u32``). One not traced to a parameter is
    left out, since a kernel reads its indices, pointers and scales that way as well."""
    found = {access for access in _global_accesses(name, body, True)[1] if access.params}
    return tuple(sorted(found, key=lambda access: (access.store, access.width, access.instruction, access.params)))


def mma_types(body: str) -> set[tuple[str, str, str]]:
    """Each tensor-core instruction of `body` with the types of its A and B (`KernelPtxFacts.mma_types`); one whose
    types cannot be told (an unknown form) is left out."""
    found = set()
    for match in _MMA.finditer(body):
        instruction = match.group(1)
        types = [token for token in instruction.split(".") if token in MMA_INPUT_TYPES]
        if instruction.startswith("wgmma.") and len(types) == 3 or len(types) == 4:
            found.add((instruction, types[1], types[2]))
        elif instruction.startswith("wmma.") and len(types) == 2:
            found.add((instruction, "f16", "f16"))      # wmma's f16 form names only D's and C's types
    return found


def conversions(body: str) -> set[tuple[str, str]]:
    """The formats the ``cvt`` instructions of `body` convert to and from (``cvt.rn.f16x2.e4m3x2``: f16 from e4m3)."""
    found = set()
    for qualifiers in _CONVERSION.findall(body):
        formats = [token[:-2] if token.endswith("x2") else token for token in qualifiers.split(".")]
        formats = [token for token in formats if token in MMA_INPUT_TYPES]
        if len(formats) == 2:
            found.add((formats[0], formats[1]))
    return found


def global_writes(name: str, body: str, traced: bool = True) -> set[tuple[str, tuple[int, ...]]]:
    """The stores, reductions and atomics of global memory in `body` (``.global``, or a generic address made from a
    pointer parameter) and its bulk copies into global memory (``cp.async.bulk.global.shared::cta``, a store, and
    ``cp.reduce.async.bulk.global...add``, an add), each with the parameters of entry `name` its address is made from
    where `traced`."""
    origin = _pointer_origins(name, body) if traced else {}
    found = {(instruction, tuple(sorted(origin.get(address, ()))))
             for instruction, address in _BULK_WRITE.findall(body)}
    for match in _GLOBAL_WRITE.finditer(body):
        instruction, _, address = match.groups()
        params = tuple(sorted(origin.get(address, ())))
        spaces = {"global", "shared", "local", "param", "const"} & {token.split("::")[0]
                                                                    for token in instruction.split(".")}
        if spaces == {"global"} or not spaces and params:
            found.add((instruction, params))
    return found


def kernel_facts(name: str, body: str, grid_sync: bool = False, dynamic_shared: bool = False,
                 block_reads: tuple[str, ...] | None = None,
                 cluster_uses: tuple[str, ...] | None = None,
                 reads_grid_size: bool | None = None,
                 constant_types: tuple[tuple[str, str], ...] | None = None,
                 accesses: tuple[VectorAccess, ...] | None = None,
                 mma: tuple[tuple[str, str, str], ...] | None = None,
                 converted: tuple[tuple[str, str], ...] | None = None,
                 writes: tuple[tuple[str, tuple[int, ...]], ...] | None = None) -> KernelPtxFacts:
    """The facts of one entry `name` whose text is `body`; whether it reads the grid workspace, the module's
    dynamic shared memory, the block's indices, its cluster's uses, the grid's size, the types of the module's
    scalar constants, its vector accesses of global memory, tensor-core instructions, conversions and writes of global
    memory with those of the functions it calls, which the module as a whole says (`ptx_facts`), are given."""
    header = body.split("{", 1)[0]
    cluster_match = _CLUSTER.search(header)
    cluster = None
    if cluster_match:
        cluster = tuple(int(v) if v else 1 for v in cluster_match.groups())
    origin: dict[str, frozenset[int]] = {}
    for match in _PARAM_MOVE.finditer(body):
        if match.group(2) == name:
            origin[match.group(1)] = origin.get(match.group(1), frozenset()) | {int(match.group(3))}
    _settle(origin, [(match.group(1), [match.group(2)]) for match in _REGISTER_MOVE.finditer(body)])
    copies = []
    for match in _TMA.finditer(body):
        operand = match.group(3)
        # PTX registers may be written more than once (a loop): a register from two parameters is untraced.
        params = origin.get(operand, frozenset())
        param = next(iter(params)) if len(params) == 1 else None
        if operand.startswith(f"{name}_param_"):
            param = int(operand.rsplit("_", 1)[1])
        copies.append(TmaCopy(int(match.group(2)), match.group(1), param))
    moves: dict[str, set[int]] = {"inc": set(), "dec": set()}
    for match in _SETMAXNREG.finditer(body):
        moves[match.group(1)].add(int(match.group(2)))
    cluster_rank = _MAX_CLUSTER_RANK.search(header)
    return KernelPtxFacts(tuple(copies), cluster,   # type: ignore[arg-type]
                          tuple(sorted(moves["inc"])), tuple(sorted(moves["dec"])), grid_sync, dynamic_shared,
                          _threads(_MAX_THREADS, header), _threads(_REQUIRED_THREADS, header),
                          int(cluster_rank.group(1)) if cluster_rank else None, block_reads,
                          cluster_uses, reads_grid_size, constant_types, accesses, tested_multiples(name, body),
                          mma, converted, writes, scalar_accesses=scalar_accesses(name, body),
                          tested_addresses=tested_addresses(name, body))


NO_REGISTER_COUNT_AT_ENTRY = "C7508"   # ptxas: 'setmaxnreg' ignored; unable to determine register count at entry


def attach_ignored_setmaxnreg(facts: dict[str, KernelPtxFacts], ignored: Sequence[tuple[str, str]],
                              options: Sequence[str] = ()) -> dict[str, KernelPtxFacts]:
    """`facts` (every entry of a program's PTX) with the lines of ptxas's log that say it ignored ``setmaxnreg``
    (`ignored`: code and text, `compile.ignored_setmaxnreg`) given to the kernels they may be of: ptxas names no
    kernel in them. C7508 (no register count at entry) is of every kernel using setmaxnreg without a
    ``__launch_bounds__`` (``.maxntid``, ``.reqntid``) where no ``-maxrregcount`` option gives all one; any other code
    of every kernel using setmaxnreg with one. Each line carries how many kernels it may be of."""
    users = [name for name, kernel in facts.items() if kernel.register_increases or kernel.register_decreases]
    global_count = any(option.startswith(("-maxrregcount", "--maxrregcount")) for option in options)
    unbounded = {name for name in users if facts[name].max_threads is None and facts[name].required_threads is None
                 and not global_count}
    found: dict[str, list[tuple[str, str, int]]] = {name: [] for name in facts}
    for code, text in dict.fromkeys(ignored):       # ptxas may repeat a line: each said once
        if len(users) == 1:
            candidates = users
        elif code == NO_REGISTER_COUNT_AT_ENTRY:
            candidates = sorted(unbounded)
        else:
            candidates = [name for name in users if name not in unbounded]
        for name in candidates:
            found[name].append((code, text, len(candidates)))
    return {name: dataclasses.replace(kernel, setmaxnreg_ignored=tuple(found[name])) for name, kernel in facts.items()}


def ptx_facts(ptx: str) -> dict[str, KernelPtxFacts]:
    """Every entry of a PTX module, by its (mangled) name."""
    dynamic = _DYNAMIC_SHARED.findall(ptx)
    graph = _CallGraph(ptx)
    grid_sync = graph.reaching(_GRID_WORKSPACE)
    uses_dynamic = frozenset[str]()
    if dynamic:
        arrays = "|".join(re.escape(array) for array in dynamic)
        uses_dynamic = graph.reaching(re.compile(rf"(?<![\w$.%])(?:{arrays})(?![\w$])"))
    constant_types = tuple(sorted((symbol, ptx_type) for ptx_type, symbol in _SCALAR_CONSTANT.findall(ptx)))
    return {name: kernel_facts(name, body, name in grid_sync, name in uses_dynamic, graph.block_reads(name),
                               graph.cluster_uses(name), graph.reads_grid_size(name), constant_types,
                               graph.vector_accesses(name), graph.mma_types(name), graph.conversions(name),
                               graph.global_writes(name))
            for name, body in _bodies(ptx).items()}
