"""The records a run produces: one `CaseResult` per kernel and shape, gathered in a `RunResult`.

They are plain data that convert to and from JSON, so results can be written
as they land, reloaded, and compared across runs.
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from ..errors import FilePath, UsageError, WrongArgumentType, WrongArgumentValue, path_argument
from ..gemm.peaks import device_peak_gflops, math_kind
from ..output_files import AppendOnlyFile, write_file
from ..specfile.model import Shape, freeze_fields
from ..status import BASELINE_LABELS, Status, is_baseline_label
from ..measure.rounds import RoundsOutcome
from ..measure.stats import TimingSummary
from .document_checks import check_results_document
from .provenance import Provenance
from ..measure.vendor_choice import AlgorithmChoice
from .settings import RunSettings



@dataclass(frozen=True)
class CaseDevice:
    """The GPU that ran a case; all None (written as null) for a case that never reached one."""

    name: str | None = None
    uuid: str | None = None
    ordinal: int | None = None

    def as_dict(self) -> dict[str, Any] | None:
        """The ``device`` object of a case (the fields that are known), or None when none is."""
        known = {key: value for key, value in asdict(self).items() if value is not None}
        return known or None

    @classmethod
    def from_dict(cls, data: dict[str, Any] | None) -> "CaseDevice":
        data = data or {}
        return cls(name=data.get("name"), uuid=data.get("uuid"), ordinal=data.get("ordinal"))

    @property
    def known(self) -> bool:
        """Whether the case reached a GPU that it names."""
        return self != CaseDevice()

    @property
    def key(self) -> str | int | None:
        """What tells GPUs apart: the UUID where known, else the ordinal."""
        return self.uuid or self.ordinal


@dataclass(frozen=True)
class DispatchChoice:
    """Which entry of a kernel's ``dispatch:`` table chose its params for a shape, and by which rule."""

    entry: int          # the entry's position in the table
    shape: str          # the shape the entry was chosen for, e.g. 4096x4096x4096
    rule: str           # how it was picked: exact, when, nearest (see spec.dispatch)
    table: str | None = None   # the family whose table picked another kernel (the record's name); None: its own

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "DispatchChoice":
        """A case's ``dispatch`` object as the results schema checks it; a key this version does not know is left
        out, as a case's own are."""
        return cls(entry=data["entry"], shape=data["shape"], rule=data["rule"], table=data.get("table"))


@dataclass(frozen=True)
class BaselineRow:
    """The baseline row a case's % of cuBLAS is measured against, in a run on several GPUs."""

    kernel: str
    shape: str
    device: CaseDevice = CaseDevice()
    algorithm: AlgorithmChoice | None = None    # a cuBLASLt row: the algorithm it ran

    def as_dict(self) -> dict[str, Any]:
        out = {"kernel": self.kernel, "shape": self.shape, "device": self.device.as_dict()}
        if self.algorithm is not None:
            out["algorithm"] = self.algorithm.to_json()
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "BaselineRow":
        return cls(kernel=data["kernel"], shape=data["shape"], device=CaseDevice.from_dict(data.get("device")),
                   algorithm=AlgorithmChoice.from_json(data.get("algorithm")))


_Part = TypeVar("_Part", bound="_CasePart")


@dataclass(frozen=True)
class _CasePart:
    """A case's sub-record whose keys are fixed, written as the JSON object results files have always held.

    Every key is optional on reading (a file may be older or partial); keys this version does not know are
    kept in `other` and written back as read. Fields named in `WRITTEN_WHEN_SET` are left out while None;
    the others are written always (as null when unknown). Tuples are written as JSON lists.
    """

    WRITTEN_WHEN_SET: ClassVar[tuple[str, ...]] = ()
    TUPLES: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        # Its mappings read-only (`FrozenDict`): a frozen record hashes, as its generated __hash__ promises, and
        # keeps what was recorded.
        freeze_fields(self, *_mapping_fields(type(self)))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for part in fields(self):
            value = getattr(self, part.name)
            if part.name == "other" or (value is None and part.name in self.WRITTEN_WHEN_SET):
                continue
            out[part.name] = list(value) if isinstance(value, tuple) else value
        out.update(getattr(self, "other"))
        return out

    @classmethod
    def from_json(cls: type[_Part], data: dict[str, Any] | None) -> _Part | None:
        if data is None:
            return None
        names = _field_names(cls)
        known = {key: tuple(value) if key in cls.TUPLES and isinstance(value, list) else value
                 for key, value in data.items() if key in names}
        other = {key: value for key, value in data.items() if key not in names}
        return cls(**known, other=other)  # type: ignore[call-arg]  # every part has `other`; the base it is typed by not


_FIELD_NAMES: dict[type, frozenset[str]] = {}


def _row_count(value: Any) -> bool:
    """Whether `value` is a group's row count as a results file holds it: a whole number (not a bool) of 0 or more."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


_MAPPING_FIELDS: dict[type, tuple[str, ...]] = {}


def _mapping_fields(part: type) -> tuple[str, ...]:
    """A part's fields that hold a mapping (`other`, an occupancy's `limits`, ...), found once per class."""
    names = _MAPPING_FIELDS.get(part)
    if names is None:
        names = _MAPPING_FIELDS[part] = tuple(item.name for item in fields(part) if str(item.type).startswith("dict"))
    return names


def _field_names(part: type) -> frozenset[str]:
    """A part's fields but `other`, found once per class: a file of tens of thousands of cases reads ten parts
    each."""
    names = _FIELD_NAMES.get(part)
    if names is None:
        names = _FIELD_NAMES[part] = frozenset(item.name for item in fields(part)) - {"other"}
    return names


@dataclass(frozen=True)
class LaunchRecord(_CasePart):
    """The launch a case was planned with (`cuda.launch.LaunchConfig`)."""

    TUPLES = ("grid", "block")

    grid: tuple[int, ...] | None = None
    block: tuple[int, ...] | None = None
    shared_bytes: int | None = None          # dynamic shared memory per block
    threads_per_block: int | None = None
    total_blocks: int | None = None
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ResourceRecord(_CasePart):
    """What the compiler reported for the kernel (`cuda.resources.KernelResources`), bytes unless said otherwise."""

    registers: int | None = None             # per thread
    barriers: int | None = None
    static_shared_bytes: int | None = None
    stack_bytes: int | None = None
    spill_store_bytes: int | None = None
    spill_load_bytes: int | None = None
    constant_bytes: int | None = None
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AttributeRecord(_CasePart):
    """What the driver says about the loaded kernel (`cuda.module.FunctionAttributes`), and its parameters' check."""

    WRITTEN_WHEN_SET = ("param_info",)

    registers: int | None = None
    static_shared_bytes: int | None = None
    local_bytes: int | None = None
    max_threads_per_block: int | None = None
    max_dynamic_shared_bytes: int | None = None
    binary_version: int | None = None
    param_info: str | None = None            # whether the image's parameter layout agrees with the signature
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class OccupancyRecord(_CasePart):
    """Theoretical occupancy (`cuda.occupancy.Occupancy`), with the driver's own figures once the kernel is loaded."""

    WRITTEN_WHEN_SET = ("driver_blocks_per_sm", "cluster", "driver_max_active_clusters", "driver_waves",
                        "driver_cluster_waves")
    TUPLES = ("limited_by", "cluster")

    blocks_per_sm: int | None = None
    limited_by: tuple[str, ...] | None = None   # every limit equal to the minimum
    limits: dict[str, int] | None = None         # blocks per SM allowed by each resource
    warps_per_block: int | None = None
    active_warps: int | None = None
    occupancy: float | None = None               # active warps / maximum warps per SM
    registers_per_warp: int | None = None
    shared_per_block: int | None = None
    shared_carveout_kb: int | None = None
    reason: str | None = None                    # why no block fits, when blocks_per_sm is 0
    driver_blocks_per_sm: int | None = None      # cuOccupancyMaxActiveBlocksPerMultiprocessor, as a cross-check
    cluster: tuple[int, ...] | None = None       # a cluster launch: the cluster's shape
    driver_max_active_clusters: int | None = None   # cuOccupancyMaxActiveClusters for that cluster
    driver_waves: float | None = None            # the grid's waves of blocks on the GPU that ran it (driver's counts)
    driver_cluster_waves: float | None = None    # a cluster launch: its waves of clusters (`cluster_waves`)
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class VerificationRecord(_CasePart):
    """How C compared with the reference (`measure.verify.Verdict`)."""

    WRITTEN_WHEN_SET = ("padding_written", "rows")

    status: str | None = None                # PASS or FAIL (a `Status`)
    rel_fro_error: float | None = None       # relative Frobenius-norm error
    max_abs_error: float | None = None
    unwritten: int | None = None             # elements the kernel left as they were before the launch
    nonfinite: int | None = None
    wrong: int | None = None                 # finite elements outside the tolerance
    right: int | None = None
    elements: int | None = None
    reference: str | None = None             # what computed the expected C
    tolerance: float | None = None
    abs_tolerance: float | None = None
    padding_written: int | None = None       # typed outputs: elements written outside the matrices
    rows: str | None = None                  # a failed batch: how its matrices' rows are numbered
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class DiagnosisRecord(_CasePart):
    """Where and how a wrong output is wrong (`results.diagnose.diagnose_output`), and its error map."""

    WRITTEN_WHEN_SET = ("error_map",)
    TUPLES = ("tile",)

    summary: str | None = None               # in words: which rows, columns or blocks are wrong
    unwritten: int | None = None
    wrong: int | None = None
    nonfinite: int | None = None
    right: int | None = None
    tile: tuple[int, ...] | None = None      # rows x columns of C per block, when the plan knows it
    # The first wrong elements, each {row, col, expected, got, kind} with the block and thread that wrote it
    # when the tile tells; kept as read (small mappings whose keys depend on what the plan knows).
    first_mismatches: list[dict[str, Any]] | None = None
    error_map: str | None = None             # the picture's path, or why none was made (run --artifacts)
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SanitizerRecord(_CasePart):
    """What compute-sanitizer reported for a case (`session.sanitize`): its tool, findings and exit code."""

    WRITTEN_WHEN_SET = ("exit_code", "message")

    tool: str | None = None                  # memcheck, racecheck, initcheck or synccheck
    # Each finding as `session.sanitize.Finding` writes it (kind, kernel, location, block, thread...).
    findings: list[dict[str, Any]] | None = None
    summary: list[str] | None = None         # the first findings, one line each
    exit_code: int | None = None             # the sanitizer's, when it ran to the end
    message: str | None = None               # why it did not (no answer in time)
    other: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class EnergyRecord(_CasePart):
    """The GPU's energy per launch over a case's sampling window (NVML's counter), and the work per joule.

    Everything the GPU drew in the window (the L2 flushes between samples, the
    gate, any rest of the sample pattern) over every launch made in it.
    """

    joules_per_launch: float | None = None
    average_w: float | None = None           # the window's energy over its seconds
    gflops_per_watt: float | None = None     # GFLOP per launch over joules per launch (GFLOP/s per W)
    window_s: float | None = None
    launches: int | None = None
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, timing: TimingSummary | None, flops: float) -> "EnergyRecord | None":
        """The figures of a summary that read the energy counter; None for one that did not."""
        if timing is None or not timing.energy_j or not timing.energy_launches:
            return None
        per_launch = timing.energy_j / timing.energy_launches
        watts = timing.energy_j / timing.energy_window_s if timing.energy_window_s else None
        return cls(joules_per_launch=per_launch, average_w=watts, gflops_per_watt=flops / 1e9 / per_launch,
                   window_s=timing.energy_window_s, launches=timing.energy_launches)


@dataclass(frozen=True)
class InterleavedRecord(_CasePart):
    """A kernel timed in rounds alternating with its vendor row (the spec's ``measure.rounds``; the module
    `measure.rounds`): each side's median per round, and the medians of those, whose ratio is the case's % of
    the vendor."""

    TUPLES = ("kernel_round_ms", "vendor_round_ms")

    vendor: str | None = None                 # the vendor row's label
    rounds: int | None = None
    kernel_ms: float | None = None            # the median of the kernel's round medians
    vendor_ms: float | None = None            # the median of the vendor's round medians
    vendor_sm_clock_mhz: float | None = None  # the vendor's median SM clock in these rounds (NVML)
    kernel_round_ms: tuple[float, ...] | None = None
    vendor_round_ms: tuple[float, ...] | None = None
    other: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def of(cls, outcome: RoundsOutcome, vendor: str) -> "InterleavedRecord":
        return cls(vendor=vendor, rounds=len(outcome.kernel), kernel_ms=outcome.kernel_ms,
                   vendor_ms=outcome.vendor_ms, vendor_sm_clock_mhz=outcome.vendor_clock_mhz,
                   kernel_round_ms=tuple(summary.median_ms for summary in outcome.kernel),
                   vendor_round_ms=tuple(summary.median_ms for summary in outcome.vendor))

    @property
    def pct_vendor(self) -> float | None:
        return 100.0 * self.vendor_ms / self.kernel_ms if self.vendor_ms and self.kernel_ms else None


@dataclass(frozen=True)
class OperandsRecord(_CasePart):
    """A typed kernel's or cuBLASLt row's operands: types, layout code, batch, leading dimensions and strides."""

    WRITTEN_WHEN_SET = ("groups", "structure", "gram", "bias", "elementwise", "batch_levels")

    types: dict[str, Any] | None = None      # `gemm.dtypes.GemmTypes.as_dict`: type name by operand and role
    layout: str | None = None                # e.g. TN
    batch: int | None = None
    ld: dict[str, int] | None = None         # leading dimension by operand (a, b, c)
    # Elements between matrices, by operand (a, b, c); [outer, inner] for a batch of two levels.
    batch_stride: dict[str, Any] | None = None
    groups: dict[str, Any] | None = None     # a grouped GEMM's: layout, each group's rows and first row, align
    # What else C was checked against, beside the product: so that a reader of the file (and `show`) knows.
    structure: dict[str, str] | None = None  # inputs drawn structured: upper, lower, diagonal or symmetric by operand
    # A Gram product: {"of": "a"} (C = A A^T, B read from A's buffer) or "b", with the "triangle" of C written; a
    # vendor row's, without triangle, is cuBLASLt's GEMM of the one buffer with itself.
    gram: dict[str, str] | None = None
    bias: str | None = None                  # a drawn bias added along N (a value per column) or M (per row)
    elementwise: list[Any] | None = None     # the functions applied after it, as a spec writes them
    # A batch of two levels: [count[0], count[1]], matrix (i, j) numbered i * count[1] + j; absent for one level.
    batch_levels: list[int] | None = None
    other: dict[str, Any] = field(default_factory=dict)



@dataclass
class CaseResult:
    """Everything known about one kernel on one shape."""

    kernel: str                      # readable id, e.g. v4[BM=64,BN=64,BK=16,TM=4,TN=4]
    name: str
    shape: Shape
    status: Status
    params: dict = field(default_factory=dict)
    instance: str | None = None
    source: str | None = None
    message: str = ""
    seed: int | None = None
    launch: LaunchRecord | None = None
    resources: ResourceRecord | None = None
    attributes: AttributeRecord | None = None
    occupancy: OccupancyRecord | None = None
    verification: VerificationRecord | None = None
    timing: TimingSummary | None = None
    gflops: float | None = None
    pct_cublas: float | None = None
    pct_peak: float | None = None
    problems: list = field(default_factory=list)
    diagnosis: DiagnosisRecord | None = None
    sanitizer: SanitizerRecord | None = None   # when the case ran under compute-sanitizer
    device: CaseDevice = CaseDevice()   # the GPU that ran it
    precision: str = "fp32"          # tf32: checked with the TF32 tolerance, % of cuBLAS is of cuBLAS TF32
    phases: dict[str, float] | None = None    # step name -> seconds: the steps differ by kind of case
    not_run: bool = False            # given up on before it ran (a fault earlier, no worker): a resume runs it
    baseline: str | None = None      # typed kernels: the label of the cuBLASLt row their % is against
    operands: OperandsRecord | None = None   # typed kernels and cuBLASLt rows

    dispatch: DispatchChoice | None = None   # the dispatch entry that chose the params
    profile: dict[str, Any] | None = None     # counter name -> value for one launch (run --profile): open-ended
    measured_against: BaselineRow | None = None   # the baseline row of pct_cublas, on several GPUs
    algorithm: AlgorithmChoice | None = None      # a cuBLASLt row: the algorithm it ran, and how it was chosen
    energy: EnergyRecord | None = None            # with NVML's energy counter: per launch, and work per joule
    interleaved: InterleavedRecord | None = None  # timed in rounds with its vendor row: pct_cublas is theirs

    # Written only when set, so that the records of untyped runs read as they always have.
    OPTIONAL_KEYS = ("baseline", "operands", "dispatch", "profile", "measured_against", "algorithm", "energy",
                     "interleaved")
    # The sub-records with fixed keys, by field.
    PARTS: ClassVar[dict[str, type[_CasePart]]] = {
        "launch": LaunchRecord, "resources": ResourceRecord, "attributes": AttributeRecord,
        "occupancy": OccupancyRecord, "verification": VerificationRecord, "diagnosis": DiagnosisRecord,
        "operands": OperandsRecord, "sanitizer": SanitizerRecord, "energy": EnergyRecord,
        "interleaved": InterleavedRecord}

    @property
    def ok(self) -> bool:
        return Status(self.status).ok

    @property
    def is_baseline(self) -> bool:
        """A baseline row: cuBLAS in FP32 or TF32 math, or a cuBLASLt matmul (``cublaslt-...``)."""
        return is_baseline_label(self.kernel)

    @property
    def baseline_label(self) -> str | None:
        """The row whose time is this case's 100%: its own for a baseline, a typed kernel's cuBLASLt row
        (None without one), else cuBLAS in the kernel's precision."""
        if self.is_baseline:
            return self.kernel
        if self.operands is not None:
            return self.baseline
        return BASELINE_LABELS.get(self.precision)

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.timing else None

    @property
    def group_rows(self) -> list[int] | None:
        """A grouped GEMM's row count per group, where its record holds them as whole numbers; else None."""
        operands = self.operands
        rows = operands.groups.get("rows") if operands is not None and isinstance(operands.groups, dict) else None
        return rows if isinstance(rows, list) and rows and all(_row_count(count) for count in rows) else None

    @property
    def matrices(self) -> int:
        """The matrices of its batch (1 for a record without a batch, or one whose count is no whole number)."""
        batch = self.operands.batch if self.operands is not None else None
        return batch if isinstance(batch, int) and not isinstance(batch, bool) and batch > 0 else 1

    @property
    def flops(self) -> int:
        """The floating-point operations of its product: 2 M N K for each matrix of its batch, or for a grouped
        GEMM 2 N K for each row its groups hold."""
        rows = self.group_rows
        if rows is not None:
            return 2 * sum(rows) * self.shape.N * self.shape.K
        return self.shape.flops * self.matrices

    @property
    def timed_in_rounds(self) -> InterleavedRecord | None:
        """Its rounds with its vendor row, where it was timed so and both sides have a time (`InterleavedRecord`)."""
        return self.interleaved if self.interleaved is not None and self.interleaved.pct_vendor is not None else None

    @property
    def math(self) -> str:
        """What its multiply-adds run on: fp32 (FMA lanes), tf32, fp16, bf16, fp8 or int8 (`gemm.peaks`)."""
        return math_kind(self.operands.types if self.operands else None, self.precision)

    def peak_gflops(self, device: dict, clock_mhz: float | None = None) -> float | None:
        """The dense peak of its math on `device` (a results file's ``device`` object) at the device's maximum
        clock, or at `clock_mhz`; None where `gemm.peaks` has no figure."""
        types = (self.operands.types if self.operands else None) or {}
        return device_peak_gflops(device, self.math, types.get("accumulate", "fp32"), clock_mhz)

    def wrong_kind(self) -> str | None:
        """What the first of its fields that holds a record holds of another kind (``shape is a Shape, got ...``),
        or None: a case a rig assembled is named at its field, not met as an AttributeError while it is written."""
        for name, kind in _RECORD_KINDS.items():
            value = getattr(self, name)
            if isinstance(value, kind) or (value is None and name not in _REQUIRED_RECORDS):
                continue
            alone = "" if name in _REQUIRED_RECORDS else " or None"
            return f"{name} is a {kind.__name__}{alone}, got {value!r:.40} ({type(value).__name__})"
        return None

    def as_dict(self) -> dict[str, Any]:
        wrong = self.wrong_kind()
        if wrong:
            raise WrongArgumentType(f"CaseResult: {wrong}")
        # The timing is left out of the deep copy: its raw samples (up to 10^5 floats) are copied by its own as_dict.
        out = asdict(dataclasses.replace(self, timing=None, algorithm=None))
        out["shape"] = {"M": self.shape.M, "N": self.shape.N, "K": self.shape.K, "label": self.shape.label}
        out["device"] = self.device.as_dict()
        out["measured_against"] = self.measured_against.as_dict() if self.measured_against else None
        out["timing"] = self.timing.as_dict() if self.timing else None
        out["algorithm"] = self.algorithm.to_json() if self.algorithm is not None else None
        for key in self.PARTS:
            part = getattr(self, key)
            out[key] = part.to_json() if part is not None else None
        for key in self.OPTIONAL_KEYS:
            if out[key] is None:
                del out[key]
        if out.get("dispatch") and out["dispatch"]["table"] is None:    # its own table's pick: said by leaving it out
            del out["dispatch"]["table"]
        return _finite(out)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CaseResult":
        data = dict(data)
        shape = data.pop("shape")
        timing = data.pop("timing", None)
        if timing:
            timing = TimingSummary.from_dict(timing)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["status"] = Status(known["status"])
        known["device"] = CaseDevice.from_dict(known.get("device"))
        if known.get("dispatch") is not None:
            known["dispatch"] = DispatchChoice.from_json(known["dispatch"])
        if known.get("measured_against") is not None:
            known["measured_against"] = BaselineRow.from_dict(known["measured_against"])
        known["algorithm"] = AlgorithmChoice.from_json(known.get("algorithm"))
        for key, part in cls.PARTS.items():
            known[key] = part.from_json(known.get(key))
        return cls(shape=Shape(shape["M"], shape["N"], shape["K"]), timing=timing, **known)


# The fields of a case that hold a record of their own, with its kind; those of `_REQUIRED_RECORDS` are never None.
_RECORD_KINDS: dict[str, type] = {"shape": Shape, "device": CaseDevice, "timing": TimingSummary,
                                  "measured_against": BaselineRow, "algorithm": AlgorithmChoice,
                                  "dispatch": DispatchChoice, **CaseResult.PARTS}
_REQUIRED_RECORDS = ("shape", "device")


@dataclass
class RunResult:
    """A whole run: where and how it ran, and its cases in the order they finished."""

    spec: str
    spec_path: str | None
    environment: dict = field(default_factory=dict)
    settings: RunSettings = field(default_factory=RunSettings)
    cases: list[CaseResult] = field(default_factory=list)
    started: str = ""
    finished: str = ""
    interrupted: bool = False
    provenance: Provenance | None = None   # commit, digests, versions, GPUs, clocks: written when known

    @property
    def ok(self) -> bool:
        return bool(self.cases) and all(case.ok for case in self.cases)

    def as_dict(self) -> dict[str, Any]:
        for index, case in enumerate(self.cases):
            if not isinstance(case, CaseResult):
                raise WrongArgumentType(f"RunResult: cases[{index}] is a CaseResult, got {case!r:.40} "
                                        f"({type(case).__name__})")
            wrong = case.wrong_kind()
            if wrong:
                raise WrongArgumentType(f"RunResult: cases[{index}].{wrong}")
        head = {"spec": self.spec, "spec_path": self.spec_path, "started": self.started, "finished": self.finished,
                "interrupted": self.interrupted, "environment": self.environment}
        if self.provenance is not None:
            head["provenance"] = self.provenance.to_json()
        return {**head, "settings": self.settings.to_json(), "cases": [case.as_dict() for case in self.cases]}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "RunResult":
        return cls(spec=data["spec"], spec_path=data.get("spec_path"), environment=data.get("environment", {}),
                   settings=RunSettings.from_json(data.get("settings", {})),
                   cases=[CaseResult.from_dict(c) for c in data.get("cases", [])],
                   started=data.get("started", ""), finished=data.get("finished", ""),
                   interrupted=data.get("interrupted", False),
                   provenance=Provenance.from_json(data.get("provenance")))

    def write_json(self, path: FilePath) -> Path:
        """Write the run to `path` (atomically, by `driver_gemm.output_files`: a reader never sees half of it).

        The run's fields are indented; its cases are one line each. A case's
        raw samples are up to tens of thousands of numbers, which the C encoder
        writes several times faster than the indenting one (which is pure
        Python): this is the last thing a run does before its tables.

        A name ending in ``.gz`` is refused (`ValueError`), as ``run --json``
        refuses it: the file would be plain JSON that its readers take for
        gzip data. Compress a written file afterwards. So is a ``.jsonl``
        name, as ``run --json`` refuses it: the readers take a .jsonl file for
        a case log (JSON lines), which a whole results file is not.

        NumPy's numbers (``np.float32``, ``np.int64``, ...) are written as the
        Python numbers they are. JSON has no NaN or infinity: a NaN or
        infinite number is written as null, and reads back (`load_results`,
        `read_results`) as None where a figure may be missing (GFLOP/s, a %
        of the vendor row). The run is checked as `read_results` checks a
        file before anything is written: what a results file cannot hold (a
        NaN time, an unknown status, a missing spec name) is a
        `WrongArgumentValue` naming the field, and no file is written.
        """
        path = path_argument("RunResult.write_json", "path", path)
        if not str(path).strip():
            raise WrongArgumentValue("RunResult.write_json: path is the results file to write, got an empty name")
        if Path(path).suffix.lower() == ".gz":
            raise WrongArgumentValue(f"RunResult.write_json: {path}: a .gz name is for a compressed results file, "
                                     "which is for reading (show, compare, plot, tune --from); write a plain .json and "
                                     "compress it afterwards")
        if Path(path).suffix.lower() == ".jsonl":
            raise WrongArgumentValue(f"RunResult.write_json: {path}: a .jsonl name is for a case log (JSON lines, "
                                     "written as a run goes), which is how the readers take it; write the whole "
                                     "results under a .json name")
        fields = self.as_dict()
        cases = fields.pop("cases")       # each already made writable by `CaseResult.as_dict`
        # The head (environment, settings, provenance) as the cases are: NaN as null, NumPy's numbers as Python's,
        # which a caller may have put there after the run.
        fields = _finite(fields)
        head = json.dumps(fields, indent=1, default=_json_default)[:-2]          # without its closing "\n}"
        body = "[]" if not cases else "[\n" + ",\n".join(json.dumps(case, default=_json_default)
                                                          for case in cases) + "\n ]"
        text = f'{head},\n "cases": {body}\n}}\n'
        try:
            check_results_document(json.loads(text), text, path)
        except UsageError as exc:
            place = f"{exc.field}: " if exc.field else ""
            raise WrongArgumentValue(f"RunResult.write_json: nothing written to {path}: {place}{exc.message}"
                                     + (f" (hint: {exc.hint})" if exc.hint else "")
                                     + (" (null: None, or a NaN or infinite number, which JSON has no word for)"
                                        if "got null" in exc.message else "")) from None
        return write_file(path, text)

def _record_line(record: dict) -> str:
    """One line of a case log."""
    return json.dumps(_finite(record), default=_json_default) + "\n"


def _finite(value):
    """JSON has no NaN or infinity: write them as null (read back as None). NumPy's numbers and arrays (a field
    set from an array: ``gflops = np.float32(...)``, an ``np.int64`` param) as the Python values they are."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k.tolist() if type(k).__module__ == "numpy" else k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        try:     # a case's raw samples (tens of thousands of times): all numbers and all finite, in one C loop
            if math.isfinite(math.fsum(value)):
                return list(value)
        except (TypeError, OverflowError):
            pass
        return [_finite(v) for v in value]
    return value


def _json_default(value):
    """What `json.dumps` calls for a value it cannot write: a NumPy number inside a list that `_finite` passed
    whole (finite, by its sum) as the Python number it is; anything else a TypeError naming it."""
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return _finite(value)
    raise WrongArgumentType(f"a record holds {type(value).__name__} {value!r:.40}, which a results file cannot "
                            "hold: give numbers, text, true/false, lists and mappings")


def case_key(case: CaseResult) -> tuple[str, str]:
    """What names a case within a run: the kernel's label (its parameters included) and the shape."""
    return case.kernel, case.shape.label


class CaseLog:
    """Finished cases appended to a file as JSON lines, each flushed and fsynced as it lands.

    The first line describes the run (spec, environment, settings); every other
    line is one `CaseResult`. A run killed mid-write leaves at most a torn last
    line, which `read` skips, so every case that finished is kept.

    A log that is not `fresh` is a resumed run's: its cases are appended after
    the header it has. A `fresh` one is a new run's: its header replaces
    whatever the file held (an earlier run's log of that name, whose cases
    would otherwise be read as this run's), once its first case is done.
    """

    def __init__(self, path: str | Path, *, fresh: bool = False):
        self.path = Path(path)
        self.fresh = fresh
        self.has_header = not fresh and self.path.exists() and self.path.stat().st_size > 0
        self._file = AppendOnlyFile(self.path)   # opened with the first line: a run that never starts leaves no file

    def write_header(self, run: "RunResult") -> None:
        """Describe the run once, before its first case (a resumed log keeps its own)."""
        if not self.has_header:
            header = {"type": "run", "spec": run.spec, "spec_path": run.spec_path, "started": run.started,
                      "environment": run.environment, "settings": run.settings.to_json()}
            if run.provenance is not None:
                header["provenance"] = run.provenance.to_json()
            if self.fresh:    # in one step: a reader sees the earlier log or this one, never a mix
                write_file(self.path, _record_line(header))
            else:
                self._write(header)
            self.has_header = True

    def _write(self, record: dict) -> None:
        self._file.append(_record_line(record))

    def append(self, case: CaseResult) -> None:
        self._write({"type": "case", **case.as_dict()})

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> "CaseLog":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def latest_rows(cases: list[CaseResult]) -> list[CaseResult]:
    """`cases` with each case once, as its last row has it, in the order of those last rows."""
    last: dict[tuple, int] = {}
    for position, case in enumerate(cases):
        key = (*case_key(case), case.device.key) if case.is_baseline else case_key(case)
        last[key] = position
    return [cases[position] for position in sorted(last.values())]


