"""Prebuilt kernel binaries: find the CUBIN for an architecture in a fatbin, and read PTX signatures.

A fatbin (``nvcc -fatbin``) is a 16-byte header (magic ``0xBA55ED50``) and entries, each with its own
header giving its kind (PTX, ELF or LTO-IR), SM number, sizes and flags (64-bit, LZ4 or Zstandard
compression, an arch-specific ``sm_90a`` or family-specific ``sm_100f`` entry); the struct layouts are
below. The entry a GPU loads is picked as the driver picks it (`entry_for_arch`): a CUBIN that runs on
it, else PTX it JIT-compiles. LZ4 is decoded here; Zstandard needs the optional ``zstandard`` module,
and without it the error says how to rebuild without compression.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass
from typing import NamedTuple

from ..errors import ImageError
from ..specfile.archs import MACHINE_CODE_RULE, PTX_RULE, compute_capability, machine_code_runs_on, ptx_runs_on
from .cubin import ParamSlot

FATBIN_MAGIC = 0xBA55ED50
KIND_PTX, KIND_ELF, KIND_LTO_IR = 1, 2, 8
KIND_NAMES = {KIND_PTX: "ptx", KIND_ELF: "elf", KIND_LTO_IR: "lto-ir"}
FLAG_LZ4 = 0x2000
FLAG_ZSTD = 0x8000
FLAG_ARCH_SPECIFIC = 0x100000
FLAG_FAMILY_SPECIFIC = 0x200000

_HEADER = struct.Struct("<IHHQ")
_ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")


@dataclass(frozen=True)
class FatbinEntry:
    """One entry of a fatbin: a CUBIN (``kind`` ``"elf"``), PTX or LTO-IR (``"lto-ir"``, which only a link
    step with nvJitLink turns into a CUBIN) for one architecture; another kind is ``"kind N"``."""

    kind: str                # "elf", "ptx", "lto-ir" or "kind N"
    sm: int                  # 90 for sm_90 / compute_90
    arch_specific: bool      # sm_90a
    compression: str | None  # None, "lz4" or "zstd"
    payload: bytes           # as stored (compressed when `compression` is set)
    uncompressed_size: int
    family_specific: bool = False   # sm_100f

    @property
    def suffix(self) -> str:
        return "a" if self.arch_specific else "f" if self.family_specific else ""

    @property
    def arch(self) -> str:
        """As nvcc's -gencode code= names it: ``sm_90a`` (a CUBIN), ``compute_90`` (PTX), ``lto_90`` (LTO-IR)."""
        prefix = {"elf": "sm", "ptx": "compute", "lto-ir": "lto"}.get(self.kind, self.kind.replace(" ", "_"))
        return f"{prefix}_{self.sm}{self.suffix}"

    @property
    def target(self) -> str:
        """The architecture as a compile target names it (``sm_90a`` for the PTX entry ``compute_90a``)."""
        return f"sm_{self.sm}{self.suffix}"

    def data(self, source: str = "<fatbin>") -> bytes:
        """The entry's bytes, decompressed."""
        if self.compression is None:
            return self.payload
        if self.compression == "lz4":
            return _lz4_block(self.payload, self.uncompressed_size, source)
        try:
            # zstandard: optional, only for a compressed fatbin
            import zstandard
        except ImportError:
            raise ImageError(f"{source}: the {self.arch} entry is Zstandard-compressed and the 'zstandard' module "
                             "is not installed (pip install 'driver-gemm[fatbin]', or rebuild with nvcc "
                             "-Xfatbin -compress-all=false / --no-compress / -compress-mode=speed)") from None
        try:
            return zstandard.ZstdDecompressor().decompress(self.payload, max_output_size=self.uncompressed_size)
        except zstandard.ZstdError as exc:
            raise ImageError(f"{source}: the {self.arch} entry does not decompress: {exc}") from None


def is_fatbin(data: bytes) -> bool:
    return len(data) >= 4 and struct.unpack_from("<I", data)[0] == FATBIN_MAGIC


def read_fatbin(data: bytes, source: str = "<fatbin>") -> list[FatbinEntry]:
    """Every entry of the fatbin `data` (named `source` in messages), in file order; bounds-checked."""
    if len(data) < _HEADER.size or not is_fatbin(data):
        raise ImageError(f"{source}: not a fatbin (no 0x{FATBIN_MAGIC:08X} header)")
    _, _, header_size, body_size = _HEADER.unpack_from(data)
    position, end = header_size, header_size + body_size
    if end > len(data):
        raise ImageError(f"{source}: truncated fatbin (header announces {end} bytes, file has {len(data)})")
    entries = []
    while position + _ENTRY.size <= end:
        (kind, _, entry_header, size, compressed, _, _, _, sm, _, _, flags, _,
         uncompressed) = _ENTRY.unpack_from(data, position)
        start = position + entry_header
        if entry_header < _ENTRY.size or start + size > end:
            raise ImageError(f"{source}: truncated or corrupt fatbin (entry at byte {position} runs past the end)")
        compression = "zstd" if flags & FLAG_ZSTD else "lz4" if flags & FLAG_LZ4 else None
        stored = compressed if compression and 0 < compressed <= size else size   # the rest is padding
        entries.append(FatbinEntry(KIND_NAMES.get(kind, f"kind {kind}"), sm, bool(flags & FLAG_ARCH_SPECIFIC),
                                   compression, data[start:start + stored], uncompressed,
                                   bool(flags & FLAG_FAMILY_SPECIFIC)))
        position = start + size
    return entries


def entry_for_arch(data: bytes, arch: str, source: str = "<fatbin>") -> FatbinEntry:
    """The entry of fatbin `data` that a GPU of `arch` loads, picked as the driver picks it: a CUBIN that runs there
    (`machine_code_runs_on`), its own architecture first (an ``sm_90a`` one first for an ``sm_90a`` target), else
    the newest older one of its major; where none runs, the newest PTX the driver JIT-compiles for it
    (`ptx_runs_on`). Where neither is there, an `ImageError` lists what the fatbin holds and says why none fits."""
    try:
        wanted = compute_capability(arch)[2]
    except ValueError:
        raise ImageError(f"{source}: not a real architecture: {arch!r}") from None
    entries = read_fatbin(data, source)
    preference = {"a": ("a", "", "f"), "f": ("f", "", "a")}.get(wanted, ("", "f", "a"))
    cubins = [entry for entry in entries if entry.kind == "elf" and machine_code_runs_on(entry.target, arch)]
    if cubins:
        return max(cubins, key=lambda entry: (entry.sm, -preference.index(entry.suffix)))
    ptx = [entry for entry in entries if entry.kind == "ptx" and ptx_runs_on(entry.target, arch)]
    if ptx:
        return max(ptx, key=lambda entry: (entry.sm, -preference.index(entry.suffix)))
    held = ", ".join(entry.arch for entry in entries) or "nothing"
    raise ImageError(f"{source}: no CUBIN for {arch} (the fatbin holds {held}): {_why_none_fits(entries, arch)}")


def _why_none_fits(entries: list[FatbinEntry], arch: str) -> str:
    lto = [entry.arch for entry in entries if entry.kind == "lto-ir"]
    if lto:
        return (f"{', '.join(lto)} is LTO-IR (nvcc code=lto_NN, -dlto), which the driver does not load: it must be "
                "linked into a CUBIN first (nvlink -dlto, or nvJitLink); build the fatbin with code=sm_NN for the "
                "target instead")
    if not entries:
        return "rebuild it with nvcc -fatbin -gencode arch=compute_NN,code=sm_NN for the target"
    specific = [entry.arch for entry in entries if entry.arch_specific]
    hint = f"; {', '.join(specific)} is arch-specific code, for that GPU alone" if specific else ""
    return (f"{MACHINE_CODE_RULE}; {PTX_RULE}{hint}: build it for {arch} (nvcc -gencode "
            f"arch=compute_{arch[3:]},code={arch}), or add PTX of an older architecture (code=compute_NN)")


def cubin_for_arch(data: bytes, arch: str, source: str = "<fatbin>") -> bytes:
    """The CUBIN of fatbin `data` that a GPU of `arch` loads (`entry_for_arch`), decompressed. Where the driver
    would JIT-compile a PTX entry instead, or nothing fits, an `ImageError` says so."""
    entry = entry_for_arch(data, arch, source)
    if entry.kind != "elf":
        raise ImageError(f"{source}: no CUBIN for {arch}: the driver would JIT-compile the fatbin's {entry.arch} "
                         "PTX entry (its resources are known only once it has)")
    return entry.data(source)


def cubin_bytes(data: bytes, arch: str, source: str = "<image>") -> bytes:
    """The CUBIN to read and load for `arch` from a prebuilt binary: a CUBIN as it is, or a fatbin's entry.

    PTX has no CUBIN to read: its signature comes from `ptx_entries`, and the
    driver compiles it when `cuModuleLoadData` loads it.
    """
    if data[:4] == b"\x7fELF":
        return data
    if is_fatbin(data):
        return cubin_for_arch(data, arch, source)
    raise ImageError(f"{source}: neither a CUBIN (ELF) nor a fatbin (0x{FATBIN_MAGIC:08X}); PTX text is read with "
                     "ptx_entries")


def _lz4_count(block: bytes, position: int, count: int) -> tuple[int, int]:
    """A 4-bit count of an LZ4 sequence, extended while it is saturated: (count, next position)."""
    if count == 15:
        while True:
            extra = block[position]
            position += 1
            count += extra
            if extra != 255:
                break
    return count, position


def _lz4_block(block: bytes, size: int, source: str) -> bytes:
    """Decode one LZ4 block of `size` bytes decoded: by the `lz4` module where it is installed, else in Python."""
    try:
        from lz4 import block as lz4_block   # optional: the fatbin extra
    except ImportError:
        lz4_block = None
    if lz4_block is None or size <= 0:   # the module needs the decoded size, which a fatbin entry states
        return _lz4_block_python(block, size, source)
    try:
        return lz4_block.decompress(block, uncompressed_size=size)
    except lz4_block.LZ4BlockError as exc:
        raise ImageError(f"{source}: corrupt LZ4-compressed fatbin entry ({exc})") from None


def _lz4_block_python(block: bytes, size: int, source: str) -> bytes:
    """Decode one LZ4 block (the raw block format: sequences of literals and back-references)."""
    out = bytearray()
    position = 0
    try:
        while position < len(block):
            token = block[position]
            literals, position = _lz4_count(block, position + 1, token >> 4)
            out += block[position:position + literals]
            position += literals
            if position >= len(block):
                break
            distance = block[position] | block[position + 1] << 8
            length, position = _lz4_count(block, position + 2, token & 15)
            length += 4
            if distance == 0 or distance > len(out):
                raise ValueError("back-reference before the start")
            start = len(out) - distance
            for index in range(length):   # overlapping copies repeat the tail byte by byte
                out.append(out[start + index])
    except (IndexError, ValueError) as exc:
        raise ImageError(f"{source}: corrupt LZ4-compressed fatbin entry ({exc})") from None
    return bytes(out[:size]) if size else bytes(out)


# ----------------------------------------------------------------------------------------------- PTX


class PtxParam(NamedTuple):
    """One ``.param`` of a PTX entry: its name, PTX type (``.u64``, ``.b8``...), size and alignment in bytes."""

    name: str
    type: str
    size: int
    align: int


_PTX_TYPE_SIZES = {"b8": 1, "u8": 1, "s8": 1, "b16": 2, "u16": 2, "s16": 2, "f16": 2, "bf16": 2,
                   "b32": 4, "u32": 4, "s32": 4, "f32": 4, "b64": 8, "u64": 8, "s64": 8, "f64": 8}
_ENTRY_DECL = re.compile(r"\.entry\s+([\w$.]+)\s*\((.*?)\)", re.DOTALL)
_PARAM_DECL = re.compile(r"\.param\s+(?:\.attribute\s*\([^)]*\)\s*)?(?:\.ptr\s*(?:\.\w+\s*)*)?"
                         r"(?:\.align\s+(\d+)\s+)?\.(\w+)\s+([\w$.]+)\s*(?:\[\s*(\d+)\s*\])?")


def ptx_entries(ptx: str) -> dict[str, tuple[PtxParam, ...]]:
    """Every ``.entry`` of PTX text and its ``.param`` list, in declaration order, without compiling.

    A by-value struct is declared ``.param .align 64 .b8 name[128]``: its size
    is the element size times the count, its alignment the ``.align``.
    """
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", ptx, flags=re.DOTALL)
    entries = {}
    for name, body in _ENTRY_DECL.findall(text):
        params = []
        for declaration in filter(None, (part.strip() for part in body.split(","))):
            match = _PARAM_DECL.search(declaration)
            if not match or match.group(2) not in _PTX_TYPE_SIZES:
                raise ImageError(f"PTX entry {name}: cannot read the parameter declaration {declaration!r}")
            align, kind, param_name, count = match.groups()
            element = _PTX_TYPE_SIZES[kind]
            params.append(PtxParam(param_name, f".{kind}", element * int(count or 1), int(align or element)))
        entries[name] = tuple(params)
    return entries


_FUNC_DECL = re.compile(r"\.func\s+(?:\([^)]*\)\s*)?([\w$.]+)")


def ptx_device_functions(ptx: str) -> tuple[str, ...]:
    """The ``.func`` (device function) names PTX text defines or declares, in order: not kernels, so never
    launched."""
    text = re.sub(r"//[^\n]*|/\*.*?\*/", "", ptx, flags=re.DOTALL)
    return tuple(dict.fromkeys(_FUNC_DECL.findall(text)))


def ptx_param_slots(params: tuple[PtxParam, ...]) -> tuple[ParamSlot, ...]:
    """The (ordinal, offset, size) layout of PTX parameters: each at the next multiple of its alignment."""
    slots, offset = [], 0
    for ordinal, param in enumerate(params):
        offset = -(-offset // param.align) * param.align
        slots.append(ParamSlot(ordinal, offset, param.size))
        offset += param.size
    return tuple(slots)
