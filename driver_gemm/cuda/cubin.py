"""Read a kernel's real parameters and resources from a CUBIN, without a GPU.

A CUBIN is an ELF64 file (machine ``EM_CUDA``). Each kernel is a function symbol marked
``STO_CUDA_ENTRY`` with its code in ``.text.<name>``; what the driver needs to launch it (parameter
offsets and sizes, registers, stack, cluster dimensions) is in the EIATTR records of
``.nv.info.<name>`` and the image-wide ``.nv.info``. The record layouts, as NVRTC and nvcc 13
write them for sm_75 to sm_120a, are noted beside the constants below.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field
from typing import Iterable, Mapping, NamedTuple

from ..errors import ImageError
from .resources import KernelResources

ELF_MAGIC = b"\x7fELF"
EM_CUDA = 190
STT_FUNC = 2
STT_OBJECT = 1
STO_CUDA_ENTRY = 0x10
RESERVED_SHARED_WINDOW = 1024   # sm_90+: bytes at the start of a kernel's shared section

# An .nv.info record: a format byte (EIFMT: 1 no value, 2 byte, 3 half-word, 4 sized blob), an attribute
# byte, then a 16-bit value or a 16-bit length and that many bytes. Layouts, checked against ptxas -v:
# - e_flags: ABI version 8 (e_ident[EI_ABIVERSION], CUDA 13) keeps the SM number in bits 8-15 (0x06005a04
#   is sm_90); ABI 7 (CUDA 12 and older) kept it in the low byte with 0x800 marking an `a` target. CUDA 13
#   does not mark sm_90a in e_flags: the tool-kit note (.note.nv.tkinfo) quotes the -arch it was built
#   with, and attribute 9 of .nv.compat is 1 for arch-specific code.
# - KPARAM_INFO: u32 index, u16 ordinal, u16 offset, u32 whose bits 18-31 are the size in bytes. Offsets
#   are relative to the parameter window (PARAM_CBANK) and may start after padding: a 64-byte aligned
#   CUtensorMap is placed so its constant-bank address is aligned.
# - Registers: REGCOUNT in .nv.info; older tool kits kept them in the top byte of .text.<name>'s sh_info,
#   which is the fallback.
# - Static shared memory: the size of .nv.shared.<name>. From sm_90 on, the 1 KB system window lies at the
#   start of each kernel's section (so ptxas's "400 bytes smem" is a 1,424-byte section), with or without a
#   .nv.shared.reserved.0 section (a -G build has none); the window is subtracted, as ptxas's figure leaves it out.
# - Spills: no record holds their bytes. EIATTR_ANNOTATIONS lists (kind, instruction offset) pairs, kind 1 a
#   spill or refill instruction: where the image has the record, that count is read, else spills are unknown.
# EIATTR numbers (the attribute byte of an .nv.info record).
EIATTR_MAX_THREADS = 0x05
EIATTR_PARAM_CBANK = 0x0A
EIATTR_REQNTID = 0x10
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_KPARAM_INFO = 0x17
EIATTR_CBANK_PARAM_SIZE = 0x19
EIATTR_MAXREG_COUNT = 0x1B
EIATTR_CRS_STACK_SIZE = 0x1E
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F
EIATTR_CUDA_API_VERSION = 0x37
EIATTR_CTA_PER_CLUSTER = 0x3D
EIATTR_EXPLICIT_CLUSTER = 0x3E
EIATTR_MAX_CLUSTER_RANK = 0x3F   # __launch_bounds__'s third argument (.maxclusterrank): a sized record of one u32
EIATTR_NUM_BARRIERS = 0x4C
EIATTR_ANNOTATIONS = 0x55
ANNOTATION_SPILL_REFILL = 1
FIRST_ARCH_WITH_SHARED_WINDOW = 90

EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL, EIFMT_SVAL = 1, 2, 3, 4
COMPAT_ARCH_SPECIFIC = 0x09     # .nv.compat attribute: 1 for an sm_XXa image

_ELF_HEADER = struct.Struct("<16sHHIQQQIHHHHHH")
ET_REL = 1            # e_type of a relocatable object: what -rdc=true and -dc build, for a link step to resolve
# Section types that hold no bytes of the file: SHT_NOBITS, and CUDA's own (0x7000000a: a relocatable image's
# .nv_debug.shared).
_NO_FILE_BYTES = (8, 0x7000000A)
_SECTION = struct.Struct("<IIQQQQIIQQ")
_SYMBOL = struct.Struct("<IBBHQQ")
USER_CONSTANT_SECTION = ".nv.constant3"    # where a source's __constant__ variables are placed
_TKINFO_ARCH = re.compile(rb"-arch\s+(sm_\d+[af]?)")


class ParamSlot(NamedTuple):
    """Where one kernel parameter lives in the launch's parameter buffer."""

    ordinal: int
    offset: int
    size: int


class InfoRecord(NamedTuple):
    """One EIATTR record: format, attribute, and the value (an int, or the blob of a sized record)."""

    format: int
    attribute: int
    value: int | bytes


@dataclass(frozen=True)
class KernelImage:
    """One kernel as its compiled image describes it: parameters and resources (bytes unless said otherwise)."""

    name: str
    params: tuple[ParamSlot, ...]
    param_bytes: int
    registers: int
    barriers: int = 0
    static_shared_bytes: int = 0
    local_bytes: int = 0                             # the entry's stack frame (per thread)
    min_stack_bytes: int = 0                         # frame plus callees', when the call graph is known
    constant_bytes: int = 0                          # constant bank 0: driver area plus parameters
    max_threads: tuple[int, int, int] | None = None  # __launch_bounds__ / .maxntid
    required_threads: tuple[int, int, int] | None = None  # .reqntid
    cluster_dims: tuple[int, int, int] | None = None      # __cluster_dims__ / .reqnctapercluster
    max_cluster_blocks: int | None = None            # __launch_bounds__'s third argument / .maxclusterrank
    max_registers: int | None = None
    cuda_api_version: int | None = None
    # Spill and refill instructions the image's annotations mark; None where it has no annotations record
    spill_instructions: int | None = None
    records: tuple[InfoRecord, ...] = field(default=(), repr=False, compare=False)

    @property
    def param_count(self) -> int:
        return len(self.params)

    @property
    def resources(self) -> KernelResources:
        """The resources as far as the image knows them, as `KernelResources`: its spill bytes are 0 where the
        kernel has no stack frame to spill to, else unknown (None), since no record of the image holds them."""
        spill = 0 if not (self.local_bytes or self.min_stack_bytes) else None
        return KernelResources(registers=self.registers, barriers=self.barriers,
                               static_shared_bytes=self.static_shared_bytes, stack_bytes=self.local_bytes,
                               spill_store_bytes=spill, spill_load_bytes=spill, constant_bytes=self.constant_bytes)


@dataclass(frozen=True)
class CubinImage:
    """A parsed CUBIN: its target architecture and every kernel (entry function) in it, by symbol name."""

    arch: str
    abi_version: int
    kernels: Mapping[str, KernelImage]
    source: str = "<image>"
    # The source's __constant__ variables: symbol -> the bytes the image gives them (zeros without an initializer)
    constants: Mapping[str, bytes] = field(default_factory=dict)
    device_functions: tuple[str, ...] = ()   # functions that are not kernels (__device__): never launched

    def kernel(self, name: str) -> KernelImage:
        """The kernel whose symbol is exactly `name`; an `ImageError` lists the kernels there are."""
        try:
            return self.kernels[name]
        except KeyError:
            listing = ", ".join(sorted(self.kernels)) or "none"
            raise ImageError(f"{self.source}: no kernel named {name!r} (kernels: {listing})") from None


def is_elf(data: bytes) -> bool:
    return data[:4] == ELF_MAGIC


def read_cubin(data: bytes, source: str = "<image>") -> CubinImage:
    """Parse a CUBIN (`data`, named `source` in messages) into its architecture and kernels.

    Every offset and size is checked against the buffer: a truncated or
    foreign file raises `ImageError` saying what is wrong, never an
    IndexError or struct.error.
    """
    elf = _Elf(bytes(data), source)
    global_info = _Info.parse(elf.section_data_named(".nv.info"), source, ".nv.info")
    per_symbol = global_info.by_symbol()
    arch = elf.arch()
    number = re.match(r"sm_(\d+)", arch)
    windowed = elf.has_section(".nv.shared.reserved.0") or bool(
        number and int(number.group(1)) >= FIRST_ARCH_WITH_SHARED_WINDOW)
    reserved_window = RESERVED_SHARED_WINDOW if windowed else 0
    kernels = {}
    device_functions = []
    for index, symbol in enumerate(elf.symbols):
        if symbol.type != STT_FUNC or not symbol.name:
            continue
        if not symbol.other & STO_CUDA_ENTRY:
            # a function private to one kernel is written $kernel$name
            device_functions.append(re.sub(r"^\$[^$]*\$", "", symbol.name))
            continue
        kernels[symbol.name] = _kernel(elf, index, symbol.name, per_symbol.get(index, {}), reserved_window)
    return CubinImage(arch, elf.abi_version, kernels, source, _constants(elf),
                      tuple(dict.fromkeys(device_functions)))


def _constants(elf: "_Elf") -> dict[str, bytes]:
    """The source's ``__constant__`` variables (object symbols of constant bank 3) with their initial bytes: the
    section's where it holds data, zeros where it is only reserved (no variable has an initializer)."""
    constants = {}
    for symbol in elf.symbols:
        if symbol.type != STT_OBJECT or not symbol.name or not 0 <= symbol.section < len(elf.sections):
            continue
        section = elf.sections[symbol.section]
        if section.name != USER_CONSTANT_SECTION:
            continue
        if section.type in _NO_FILE_BYTES or symbol.value + symbol.size > section.size:
            constants[symbol.name] = bytes(symbol.size)
        else:
            start = section.offset + symbol.value
            constants[symbol.name] = elf.data[start:start + symbol.size]
    return constants


_RELOCATION = struct.Struct("<QQq")
SHT_RELA = 4


def pointer_targets(data: bytes, source: str = "<image>") -> dict[str, str]:
    """The function each initialised device pointer variable of a CUBIN points at: {variable: symbol}.

    ``__device__ void* p = (void*)&kernel<64>;`` leaves a relocation at p's
    place in the initialised data naming the kernel's symbol: how an nvcc
    build says which mangled name an instance expression became
    (`cuda.nvcc`), exactly, defaulted template arguments and overloads included.
    """
    elf = _Elf(bytes(data), source)
    by_place = {(symbol.section, symbol.value): symbol.name for symbol in elf.symbols
                if symbol.type == STT_OBJECT and symbol.name}
    targets = {}
    for section in elf.sections:
        if section.type != SHT_RELA:
            continue
        for position in range(section.offset, section.offset + section.size - _RELOCATION.size + 1,
                              _RELOCATION.size):
            offset, info, _ = _RELOCATION.unpack_from(elf.data, position)
            symbol_index = info >> 32
            variable = by_place.get((section.info, offset))
            if variable is not None and 0 <= symbol_index < len(elf.symbols):
                targets[variable] = elf.symbols[symbol_index].name
    return targets


def initialised_words(data: bytes, names: Iterable[str], source: str = "<image>") -> dict[str, int]:
    """The value of each named 8-byte ``__device__`` variable of a CUBIN that holds an initial value (in
    ``.nv.global.init``), by name; a name the image lacks, or one without 8 bytes of data, is left out."""
    elf = _Elf(bytes(data), source)
    wanted = set(names)
    values = {}
    for symbol in elf.symbols:
        if symbol.name not in wanted or symbol.type != STT_OBJECT or not 0 <= symbol.section < len(elf.sections):
            continue
        section = elf.sections[symbol.section]
        if section.type in _NO_FILE_BYTES or symbol.value + 8 > section.size:
            continue
        values[symbol.name] = struct.unpack_from("<Q", elf.data, section.offset + symbol.value)[0]
    return values


def _kernel(elf: "_Elf", symbol_index: int, name: str, per_symbol: dict[int, int],
            reserved_window: int) -> KernelImage:
    info = _Info.parse(elf.section_data_named(f".nv.info.{name}"), elf.source, f".nv.info.{name}")
    params = tuple(sorted(info.params(), key=lambda slot: slot.ordinal))
    param_bytes = info.half(EIATTR_CBANK_PARAM_SIZE)
    if param_bytes is None:
        param_bytes = max((slot.offset + slot.size for slot in params), default=0)
    registers = per_symbol.get(EIATTR_REGCOUNT)
    if registers is None:
        text = elf.section_named(f".text.{name}")
        registers = text.info >> 24 if text else 0
    shared = elf.section_named(f".nv.shared.{name}")
    static_shared = max(0, shared.size - reserved_window) if shared else 0
    constant = elf.section_named(f".nv.constant0.{name}")
    return KernelImage(
        name=name, params=params, param_bytes=param_bytes, registers=registers,
        barriers=info.half(EIATTR_NUM_BARRIERS) or 0,
        static_shared_bytes=static_shared,
        local_bytes=per_symbol.get(EIATTR_FRAME_SIZE, 0),
        min_stack_bytes=per_symbol.get(EIATTR_MIN_STACK_SIZE, 0),
        constant_bytes=constant.size if constant else 0,
        max_threads=info.triple(EIATTR_MAX_THREADS), required_threads=info.triple(EIATTR_REQNTID),
        cluster_dims=info.triple(EIATTR_CTA_PER_CLUSTER), max_cluster_blocks=info.word(EIATTR_MAX_CLUSTER_RANK),
        max_registers=info.half(EIATTR_MAXREG_COUNT),
        cuda_api_version=info.word(EIATTR_CUDA_API_VERSION), spill_instructions=info.spill_instructions(),
        records=info.records)


# ----------------------------------------------------------------------------------- ELF structure


class _Section(NamedTuple):
    name: str
    type: int
    offset: int
    size: int
    link: int
    info: int


class _Symbol(NamedTuple):
    name: str
    type: int
    other: int
    section: int
    value: int = 0
    size: int = 0


class _Elf:
    """The parts of an ELF64 little-endian file a CUBIN needs, with every read bounds-checked."""

    def __init__(self, data: bytes, source: str):
        self.data = data
        self.source = source
        if len(data) < _ELF_HEADER.size or not is_elf(data):
            raise ImageError(f"{source}: not a CUBIN (no ELF header; {len(data)} bytes)")
        ident = data[:16]
        if ident[4] != 2 or ident[5] != 1:
            raise ImageError(f"{source}: not a CUBIN (ELF class {ident[4]}, data {ident[5]}; expected 64-bit "
                             "little-endian)")
        (_, kind, machine, _, _, _, section_offset, self.flags, _, _, _, entry_size, count,
         names_index) = _ELF_HEADER.unpack_from(data)
        if machine != EM_CUDA:
            raise ImageError(f"{source}: an ELF file for machine {machine}, not a CUDA CUBIN (machine {EM_CUDA})")
        if kind == ET_REL:
            raise ImageError(f"{source}: a relocatable CUBIN (built with -rdc=true or -dc), whose device code is not "
                             "linked yet and cannot be loaded: link it into an executable CUBIN with nvlink, or "
                             "build it without -rdc")
        self.abi_version = ident[8]
        if count and entry_size < _SECTION.size:
            raise ImageError(f"{source}: corrupt CUBIN (section header size {entry_size})")
        self._need(section_offset, entry_size * count, "the section header table")
        raw = [_SECTION.unpack_from(data, section_offset + i * entry_size) for i in range(count)]
        if count and not 0 <= names_index < count:
            raise ImageError(f"{source}: corrupt CUBIN (section name table index {names_index} of {count})")
        names = raw[names_index] if count else None
        self.sections = []
        for (name, kind, _, _, offset, size, link, info, _, _) in raw:
            if kind not in _NO_FILE_BYTES:   # shared memory sections occupy no bytes of the file
                self._need(offset, size, "a section")
            text = self._string(names[4], names[5], name) if names else ""
            self.sections.append(_Section(text, kind, offset, size, link, info))
        self._by_name = {section.name: section for section in self.sections}
        self.symbols = self._symbols()

    def _need(self, offset: int, size: int, what: str) -> None:
        if offset < 0 or size < 0 or offset + size > len(self.data):
            raise ImageError(f"{self.source}: truncated or corrupt CUBIN ({what} at byte {offset}, {size} bytes, "
                             f"runs past the end of the {len(self.data)}-byte file)")

    def _string(self, table_offset: int, table_size: int, index: int) -> str:
        if index >= table_size:
            raise ImageError(f"{self.source}: corrupt CUBIN (string index {index} outside its {table_size}-byte table)")
        start = table_offset + index
        end = self.data.find(b"\0", start, table_offset + table_size)
        return self.data[start:end if end >= 0 else table_offset + table_size].decode("utf-8", "replace")

    def _symbols(self) -> list[_Symbol]:
        table = next((s for s in self.sections if s.type == 2), None)   # SHT_SYMTAB
        if table is None:
            return []
        if not 0 <= table.link < len(self.sections):
            raise ImageError(f"{self.source}: corrupt CUBIN (symbol table names section {table.link})")
        strings = self.sections[table.link]
        symbols = []
        for position in range(table.offset, table.offset + table.size - _SYMBOL.size + 1, _SYMBOL.size):
            name, info, other, section, value, size = _SYMBOL.unpack_from(self.data, position)
            symbols.append(_Symbol(self._string(strings.offset, strings.size, name), info & 0xF, other, section,
                                   value, size))
        return symbols

    def has_section(self, name: str) -> bool:
        return name in self._by_name

    def section_named(self, name: str) -> _Section | None:
        return self._by_name.get(name)

    def section_data_named(self, name: str) -> bytes:
        section = self._by_name.get(name)
        return self.data[section.offset:section.offset + section.size] if section and section.type != 8 else b""

    def arch(self) -> str:
        """``sm_90``, ``sm_90a``...: the tool-kit note's ``-arch`` when present, else e_flags and .nv.compat."""
        match = _TKINFO_ARCH.search(self.section_data_named(".note.nv.tkinfo"))
        if match:
            return match.group(1).decode()
        if self.abi_version >= 8:
            sm, specific = (self.flags >> 8) & 0xFF, bool(self.flags & 0x8)
        else:
            sm, specific = self.flags & 0xFF, bool(self.flags & 0x800)
        compat = _Info.parse(self.section_data_named(".nv.compat"), self.source, ".nv.compat", lenient=True)
        specific = specific or compat.half(COMPAT_ARCH_SPECIFIC) == 1
        return f"sm_{sm}{'a' if specific else ''}"


# ----------------------------------------------------------------------------------- .nv.info records


class _Info:
    """The EIATTR records of one .nv.info section."""

    def __init__(self, records: tuple[InfoRecord, ...]):
        self.records = records

    @classmethod
    def parse(cls, data: bytes, source: str, section: str, lenient: bool = False) -> "_Info":
        records = []
        position = 0
        while position + 4 <= len(data):
            form, attribute, value = data[position], data[position + 1], data[position + 2] | data[position + 3] << 8
            position += 4
            if form == EIFMT_SVAL:
                if position + value > len(data):
                    if lenient:
                        break
                    raise ImageError(f"{source}: corrupt CUBIN ({section}: attribute {attribute:#x} of {value} bytes "
                                     f"runs past the section's {len(data)} bytes)")
                records.append(InfoRecord(form, attribute, data[position:position + value]))
                position += value
            elif form in (EIFMT_NVAL, EIFMT_BVAL, EIFMT_HVAL):
                records.append(InfoRecord(form, attribute, value))
            elif lenient:
                break
            else:
                raise ImageError(f"{source}: corrupt CUBIN ({section}: unknown record format {form} at byte "
                                 f"{position - 4})")
        return cls(tuple(records))

    def _blobs(self, attribute: int) -> list[bytes]:
        return [r.value for r in self.records if r.attribute == attribute and isinstance(r.value, bytes)]

    def half(self, attribute: int) -> int | None:
        for record in self.records:
            if record.attribute == attribute:
                if isinstance(record.value, int):
                    return record.value
                return int.from_bytes(record.value[:4], "little") if record.value else None
        return None

    def word(self, attribute: int) -> int | None:
        blobs = [b for b in self._blobs(attribute) if len(b) >= 4]
        return int.from_bytes(blobs[0][:4], "little") if blobs else self.half(attribute)

    def triple(self, attribute: int) -> tuple[int, int, int] | None:
        blobs = [b for b in self._blobs(attribute) if len(b) >= 12]
        return tuple(struct.unpack_from("<3I", blobs[0])) if blobs else None

    def spill_instructions(self) -> int | None:
        """The spill and refill instructions EIATTR_ANNOTATIONS marks; None without that record."""
        blobs = self._blobs(EIATTR_ANNOTATIONS)
        if not blobs:
            return None
        return sum(1 for blob in blobs for position in range(0, len(blob) - 7, 8)
                   if struct.unpack_from("<I", blob, position)[0] == ANNOTATION_SPILL_REFILL)

    def params(self) -> list[ParamSlot]:
        slots = []
        for blob in self._blobs(EIATTR_KPARAM_INFO):
            if len(blob) < 12:
                continue
            _, ordinal, offset, packed = struct.unpack_from("<IHHI", blob)
            slots.append(ParamSlot(ordinal, offset, packed >> 18))
        return slots

    def by_symbol(self) -> dict[int, dict[int, int]]:
        """Image-wide records that name a function by symbol index: {symbol: {attribute: value}}."""
        found: dict[int, dict[int, int]] = {}
        for attribute in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE, EIATTR_MAX_STACK_SIZE):
            for blob in self._blobs(attribute):
                if len(blob) >= 8:
                    symbol, value = struct.unpack_from("<II", blob)
                    found.setdefault(symbol, {})[attribute] = value
        return found
