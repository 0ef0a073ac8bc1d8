"""What a results file must hold, checked for the reader and the writer alike.

`read_results` refuses a file that fails these checks, and `RunResult.write_json` refuses to write one: a run a
caller built or changed is checked before it is written, so that a file written is a file that reads back. The
schema (`schema.json`) is checked by the small interpreter below, which knows the part of JSON Schema the file
uses, so checking needs no dependency; it is compiled once into a predicate that passes a good file quickly, and
walked only to name what fails. Beyond the schema: the summary of times against the samples, the check of C by
its counts, figures within what a GPU run gives, text that is Unicode, and no case held twice with other figures.
"""

from __future__ import annotations

import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UsageError
from ..measure.stats import SAMPLE_DIGITS
from ..status import is_baseline_label
from ..specfile.limits import MAX_NAME_CHARS
from .text import first_control, printable, shortened

SCHEMA_PATH = Path(__file__).with_name("schema.json")
_TIME_ORDER = ("min_ms", "q1_ms", "median_ms", "q3_ms", "max_ms")
# Figures no GPU run comes near, by the case's field that holds them: (least, most, unit). A file holding one was not
# written by a run as it is; shown, it would print a number hundreds of digits long, or leave a plot's axes no ticks.
MOST_GFLOPS = 1e12        # a zettaFLOP/s
MOST_PCT = 1e8            # a million times the vendor library's speed, or the peak's
LEAST_MS, MOST_MS = 1e-6, 1e9     # a nanosecond (no launch is shorter) to eleven days (no sample is longer)
MOST_MHZ = 1e5
LEAST_MHZ = 1.0           # a GPU's clock is past a megahertz (0: not read, `_ZERO_IF_NOT_READ`)
MOST_COUNT = 2.0**64     # bytes, blocks, waves: every count driver-gemm writes fits 64 bits
_Figures = dict[str, tuple[float, float, str]]
_CASE_FIGURES: _Figures = {"gflops": (0, MOST_GFLOPS, "GFLOP/s"), "pct_cublas": (0, MOST_PCT, "%"),
                           "pct_peak": (0, MOST_PCT, "%")}
_PART_FIGURES: dict[str, _Figures] = {
    "timing": {**{name: (LEAST_MS, MOST_MS, "ms") for name in (*_TIME_ORDER, "mean_ms")},
               "stdev_ms": (0, MOST_MS, "ms"), "total_ms": (0, 1e6 * MOST_MS, "ms"),
               **{name: (LEAST_MHZ, MOST_MHZ, "MHz") for name in ("sm_clock_mhz", "sm_clock_min_mhz",
                                                                 "sm_clock_reference_mhz", "locked_sm_clock_mhz")}},
    # a median of round medians, each of samples no shorter than LEAST_MS: a shorter one (5e-324) is no time, and
    # the memory note divides by it
    "interleaved": {"kernel_ms": (LEAST_MS, MOST_MS, "ms"), "vendor_ms": (LEAST_MS, MOST_MS, "ms"),
                    "vendor_sm_clock_mhz": (LEAST_MHZ, MOST_MHZ, "MHz")},
    "energy": {"joules_per_launch": (0, 1e9, "J"), "average_w": (0, 1e9, "W"),
               "gflops_per_watt": (0, MOST_GFLOPS, "GFLOP/s per W")},
    # the notes print a wave count as a whole number: a grid has fewer than 2^64 blocks, each SM holds one at least
    "occupancy": {"driver_waves": (0, MOST_COUNT, "waves"), "driver_cluster_waves": (0, MOST_COUNT, "waves")},
    "profile": {"duration_us": (0, 1e3 * MOST_MS, "us"), "dram_bytes": (0, MOST_COUNT, "bytes"),
                "arithmetic_intensity": (0, MOST_COUNT, "FLOP/byte"), "shared_bank_conflicts": (0, MOST_COUNT, ""),
                **{name: (0, MOST_PCT, "%") for name in ("achieved_occupancy_pct", "fma_pipe_pct", "tensor_pipe_pct")}},
}
# The figures of the run's GPU (``environment.device``) that the tables, notes and plots compute with: its peaks, the
# ridge of the roofline (a peak over the DRAM's bandwidth) and the % of that bandwidth a case moved its bytes at. A
# bandwidth of 5e-324 GB/s would put the ridge at infinity; none of these is below what any GPU has.
_DEVICE_FIGURES: _Figures = {
    **{name: (1e3 * LEAST_MHZ, 1e3 * MOST_MHZ, "kHz") for name in ("clock_khz", "memory_clock_khz")},
    "sm_count": (1, 1e5, "SMs"), "fp32_lanes_per_sm": (1, 1e5, "lanes"), "memory_bus_bits": (1, 1e6, "bits"),
    "fp32_peak_gflops": (1, MOST_GFLOPS, "GFLOP/s"), "memory_bandwidth_gbs": (1, 1e9, "GB/s")}
# Figures a run writes as 0 where it could not read them (NVML, the driver): a clock of 0 is no clock (the tables
# pass over it), not one outside its range.
_ZERO_IF_NOT_READ = frozenset({"sm_clock_mhz", "sm_clock_min_mhz", "sm_clock_reference_mhz", "locked_sm_clock_mhz",
                               "memory_clock_khz", "memory_bus_bits"})
_INT_BOUND = 1 << 64      # every whole number driver-gemm writes fits 64 bits (seeds are unsigned)
# A run summarises its samples (`measure.stats.summarize`) and keeps each rounded to SAMPLE_DIGITS significant digits,
# which moves every figure of the summary by at most half a unit of the last digit kept: one unit is read as rounding.
# The figures are worked out again here with NumPy (`_summary_of`): summarize's loops over thousands of samples a
# case would take longer than the rest of reading a file.
SUMMARY_TOLERANCE = 10.0 ** (1 - SAMPLE_DIGITS)
_SUMMARY_FIGURES = ("median_ms", "q1_ms", "q3_ms", "min_ms", "max_ms", "mean_ms", "total_ms")
_CHECK_COUNTS = ("right", "wrong", "unwritten", "nonfinite")     # the elements of C, each counted in one of them
# Half of a UTF-16 surrogate pair reaches a string only as a JSON escape (UTF-8 decoding refuses the bytes of one);
# a whole pair, as an ASCII-only writer spells a character past U+FFFF, is read as that character.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


@lru_cache(maxsize=1)
def results_schema() -> dict:
    """The JSON Schema of results files shipped with the package."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))

def check_repeated_cases(cases: list[dict], where: str) -> None:
    """Refuse a case that a whole run holds twice with other figures: `show` would count it twice and `compare` match
    whichever comes last. A run writes a case once, save that a search meeting a configuration again records it again
    as its tuning cache gave it, the same figures under its message: such a repeat is read as written. A case is its
    kernel's label, its shape and its GPU, as `compare` matches them."""
    first: dict[tuple, int] = {}
    for index, case in enumerate(cases):
        device = case.get("device") or {}
        key = (case["kernel"], _shape_label(case["shape"]), device.get("uuid") or device.get("ordinal"))
        earlier = first.setdefault(key, index)
        if earlier != index and _without_message(cases[earlier]) != _without_message(case):
            on_gpu = f" on {shortened(printable(str(device['name'])))}" if device.get("name") else ""
            raise UsageError(f"{shortened(printable(key[0]))} at {key[1]}{on_gpu} is also cases[{earlier}], with other "
                             "figures: a run writes each case once, so these results were not written by a run as "
                             "they are", where=where, field=f"cases[{index}]",
                             hint="keep one of the two, or give each its own file (compare OLD NEW matches by case)")


def _shape_label(shape: dict) -> str:
    return f"{shape['M']}x{shape['N']}x{shape['K']}"


def _without_message(case: dict) -> dict:
    return {name: value for name, value in case.items() if name != "message"}


def check_case_consistency(case: dict, path: str, where: str) -> None:
    """What the schema cannot say: the summary's times in order and of the case's own samples, the shape's label its
    dimensions, the check of C by its own counts and errors, and every figure within what a GPU run gives
    (`_CASE_FIGURES`, `_PART_FIGURES`, the raw samples)."""
    shape = case["shape"]
    label = _shape_label(shape)
    if "label" in shape and shape["label"] != label:
        raise UsageError(f"label {_show(shape['label'])} is not M x N x K = {label}", where=where,
                         field=json_path(path, "shape.label"))
    for key in ("kernel", "name"):
        # no kernel name or label driver-gemm writes holds one (a spec's names are checked when it is read), and
        # `tune --from` would copy it into the spec it writes, which YAML then refuses
        control = first_control(case[key])
        if control is not None:
            raise UsageError(f"{ascii(case[key])[:80]} holds the control character {ascii(control)}: no kernel name "
                             "or label driver-gemm writes has one", where=where, field=json_path(path, key))
    _check_name(case, "name", path, where)
    _check_figures(case, _CASE_FIGURES, path, where)
    _check_status(case, path, where)
    verification = case.get("verification") or {}
    verdict = verification.get("status")
    if verdict is not None and case.get("status") in ("PASS", "FAIL") and verdict != case["status"]:
        # PASS and FAIL are the check's own verdict: a case of one whose check says the other was not written so
        raise UsageError(f"the case is {case['status']} but its check of C says {verdict}: these results were not "
                         "written by a run as they are", where=where, field=json_path(path, "verification.status"))
    _check_verification(verification, json_path(path, "verification"), where)
    for part, figures in _PART_FIGURES.items():
        if isinstance(case.get(part), dict):
            _check_figures(case[part], figures, json_path(path, part), where)
    timing = case.get("timing")
    if not timing:
        return
    samples = timing.get("samples_ms")
    if samples and not LEAST_MS <= min(samples) <= max(samples) <= MOST_MS:   # thousands: one pass each, in C
        index = next(index for index, value in enumerate(samples) if not LEAST_MS <= value <= MOST_MS)
        raise UsageError(_absurd(samples[index], LEAST_MS, MOST_MS, "ms"), where=where,
                         field=json_path(path, f"timing.samples_ms[{index}]"))
    times = [timing[name] for name in _TIME_ORDER]
    for (low_name, low), (high_name, high) in zip(zip(_TIME_ORDER, times), zip(_TIME_ORDER[1:], times[1:])):
        if low > high * (1 + 1e-9):
            raise UsageError(f"{low_name} = {low!r} is above {high_name} = {high!r}: the summary is not of "
                             "real samples", where=where, field=json_path(path, f"timing.{low_name}"))
    if samples:
        _check_summary(timing, samples, json_path(path, "timing"), where)
    _check_sample_count(timing, json_path(path, "timing"), where)


def _check_sample_count(timing: dict, path: str, where: str) -> None:
    """Refuse a mean outside the samples' range, and a count of samples that is not the one the total and the mean
    are of: a run's total is the sum of its samples and its mean that over their count (`summarize`), and the tables
    print the count as it is. A file without its raw samples (`_check_summary`) is held to this much."""
    count, mean, total = timing["samples"], timing["mean_ms"], timing["total_ms"]
    if timing["min_ms"] > mean * (1 + 1e-9) or mean > timing["max_ms"] * (1 + 1e-9):
        raise UsageError(f"mean_ms = {mean!r} is outside min_ms = {timing['min_ms']!r} to max_ms = "
                         f"{timing['max_ms']!r}: the summary is not of real samples", where=where,
                         field=json_path(path, "mean_ms"))
    if abs(count * mean - total) > SUMMARY_TOLERANCE * total:
        raise UsageError(f"samples = {count:,} at a mean of {mean!r} ms make {count * mean:.6g} ms, not total_ms = "
                         f"{total!r}: these results were not written by a run as they are", where=where,
                         field=json_path(path, "samples"))


def check_run_record(record: dict, where: str) -> None:
    """What a run's own fields (a whole file's top, a case log's header line) must hold beyond the schema: the name
    of a spec (`_check_name`), and a GPU whose figures are a GPU's (`_check_device`)."""
    _check_name(record, "spec", "", where)
    _check_device(record.get("environment"), where)


def _check_name(record: dict, key: str, path: str, where: str) -> None:
    """Refuse a spec's or a kernel's name longer than a spec may give it (`MAX_NAME_CHARS`): messages, warnings and
    the YAML `tune --from` writes quote it whole."""
    name = record.get(key)
    if isinstance(name, str) and len(name) > MAX_NAME_CHARS:
        raise UsageError(f"a name of {len(name):,} characters ({_show(name)}), where a spec's and a kernel's are at "
                         f"most {MAX_NAME_CHARS}: these results were not written by a run as they are", where=where,
                         field=json_path(path, key))


def _check_device(environment: Any, where: str) -> None:
    """Refuse a run's GPU (``environment.device``) with a figure no GPU has (`_DEVICE_FIGURES`), or an FP32 peak or
    a DRAM bandwidth that is not the product of the figures it is made of (`cuda.device.DeviceProperties`), where
    the file holds them: the tables print the peak beside its product, and the notes and plots divide by both. A
    device that lacks a figure is no mistake (an older or a partial record): what it lacks is unknown."""
    device = environment.get("device") if isinstance(environment, dict) else None
    if not isinstance(device, dict):
        return
    path = "environment.device"
    _check_figures(device, _DEVICE_FIGURES, path, where)
    peak, sm_count, lanes, clock_khz = (device.get(name) for name in ("fp32_peak_gflops", "sm_count",
                                                                      "fp32_lanes_per_sm", "clock_khz"))
    if _is_figure(peak) and _is_figure(sm_count) and _is_figure(lanes) and _is_figure(clock_khz):
        product = sm_count * lanes * 2 * clock_khz / 1e6
        if abs(peak - product) > SUMMARY_TOLERANCE * product:
            raise UsageError(f"fp32_peak_gflops = {peak!r}, but {sm_count} SMs x {lanes} lanes x 2 x "
                             f"{clock_khz / 1e6:.4g} GHz make {product:.6g}: these results were not written by a run "
                             "as they are", where=where, field=json_path(path, "fp32_peak_gflops"))
    bandwidth, clock_khz, bus_bits = (device.get(name) for name in ("memory_bandwidth_gbs", "memory_clock_khz",
                                                                    "memory_bus_bits"))
    if _is_figure(bandwidth) and _is_figure(clock_khz) and _is_figure(bus_bits):
        product = 2 * clock_khz * 1e3 * bus_bits / 8 / 1e9
        if abs(bandwidth - product) > SUMMARY_TOLERANCE * product:
            raise UsageError(f"memory_bandwidth_gbs = {bandwidth!r}, but twice the memory clock of "
                             f"{clock_khz / 1e6:.4g} GHz over a {bus_bits}-bit bus make {product:.6g}: these results "
                             "were not written by a run as they are", where=where,
                             field=json_path(path, "memory_bandwidth_gbs"))


def _is_figure(value: Any) -> bool:
    """A number other than 0, as a figure a product is made of is (0: not read; true and false are no figures)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value != 0


def _check_status(case: dict, path: str, where: str) -> None:
    """Refuse a status no run gives its case: a case given up on before it ran (``not_run``) is an ERROR with no
    time, and REF is a baseline row's alone (its output is the reference the kernels are checked against)."""
    status = case.get("status")
    if case.get("not_run") and status != "ERROR":
        raise UsageError(f"not_run is true with status {status}: a case given up on before it ran is an ERROR, so "
                         "these results were not written by a run as they are", where=where,
                         field=json_path(path, "status"))
    if case.get("not_run") and case.get("timing"):
        raise UsageError("not_run is true, yet the case has a timing: a case given up on before it ran has none, so "
                         "these results were not written by a run as they are", where=where,
                         field=json_path(path, "timing"))
    if status == "REF" and not is_baseline_label(case["kernel"]):
        raise UsageError(f"status REF on {printable(case['kernel'])!s:.80}, a kernel's row: REF is a baseline row's "
                         "(cuBLAS or cuBLASLt), so these results were not written by a run as they are", where=where,
                         field=json_path(path, "status"))


def _check_summary(timing: dict, samples: list, path: str, where: str) -> None:
    """Refuse a summary that is not of the case's own samples: a run computes one from the other (`summarize`), and
    `compare` judges by the samples while it shows the summary, so a file whose two disagree would show one change
    and judge another."""
    if timing["samples"] != len(samples):
        raise UsageError(f"samples = {timing['samples']!r}, but samples_ms holds {len(samples):,}: these results were "
                         "not written by a run as they are", where=where, field=json_path(path, "samples"))
    own = _summary_of(samples)
    for name in _SUMMARY_FIGURES:
        value, expected = timing[name], own[name]
        if abs(value - expected) > SUMMARY_TOLERANCE * expected:
            raise UsageError(_not_of_samples(name, value, expected, len(samples)), where=where,
                             field=json_path(path, name))
    # Each sample moved by rounding moves the deviation by no more than the largest move (the triangle inequality).
    if abs(timing["stdev_ms"] - own["stdev_ms"]) > SUMMARY_TOLERANCE * own["max_ms"]:
        raise UsageError(_not_of_samples("stdev_ms", timing["stdev_ms"], own["stdev_ms"], len(samples)),
                         where=where, field=json_path(path, "stdev_ms"))


def _summary_of(samples: list) -> dict[str, float]:
    """The figures `measure.stats.summarize` gives of `samples` (its quantiles are NumPy's default method)."""
    ordered = np.sort(np.asarray(samples, dtype=np.float64))
    q1, median, q3 = (float(value) for value in np.quantile(ordered, (0.25, 0.5, 0.75)))
    total = float(ordered.sum())
    stdev = float(ordered.std(ddof=1)) if len(ordered) > 1 else 0.0
    return {"median_ms": median, "q1_ms": q1, "q3_ms": q3, "min_ms": float(ordered[0]), "max_ms": float(ordered[-1]),
            "mean_ms": total / len(ordered), "total_ms": total, "stdev_ms": stdev}


def _not_of_samples(name: str, value: float, expected: float, count: int) -> str:
    return (f"{name} = {value!r}, but its own {count:,} samples_ms give {expected:.{SAMPLE_DIGITS}g}: the summary is "
            "not of the samples beside it, so these results were not written by a run as they are")


def _check_verification(verification: dict, path: str, where: str) -> None:
    """Refuse a check of C whose own figures contradict it: counts of elements past C's elements, or a PASS that the
    rule a run gives it (`measure.verify`) would not give: every element written, finite and not wrong, nothing
    written into the padding, and the errors within their tolerances."""
    elements = verification.get("elements")
    counts = {name: verification.get(name) for name in _CHECK_COUNTS}
    if isinstance(elements, int):
        for name, count in counts.items():
            if isinstance(count, int) and count > elements:
                raise UsageError(f"{name} = {count:,} elements, more than the {elements:,} of C: these results were "
                                 "not written by a run as they are", where=where, field=json_path(path, name))
        if all(isinstance(count, int) for count in counts.values()) and sum(counts.values()) != elements:
            raise UsageError(f"right, wrong, unwritten and nonfinite count {sum(counts.values()):,} elements, not the "
                             f"{elements:,} of C: these results were not written by a run as they are", where=where,
                             field=json_path(path, "right"))
    if verification.get("status") != "PASS":
        return
    for name in (*_CHECK_COUNTS[1:], "padding_written"):
        if verification.get(name):
            raise UsageError(f"the check says PASS with {name} = {verification[name]:,}: a check passes only with "
                             "none, so these results were not written by a run as they are", where=where,
                             field=json_path(path, name))
    for error, tolerance in (("rel_fro_error", "tolerance"), ("max_abs_error", "abs_tolerance")):
        value, bound = verification.get(error), verification.get(tolerance)
        if isinstance(value, (int, float)) and isinstance(bound, (int, float)) and value > bound:
            raise UsageError(f"the check says PASS with {error} = {value:.3g} over its {tolerance} = {bound:.3g}: a "
                             "check passes only within it, so these results were not written by a run as they are",
                             where=where, field=json_path(path, error))


def _check_figures(record: dict, figures: _Figures, path: str, where: str) -> None:
    """Refuse a figure of `record` (a case, or one of its parts at `path`) outside the range `figures` gives it."""
    for name, (least, most, unit) in figures.items():
        value = record.get(name)
        if value == 0 and name in _ZERO_IF_NOT_READ:
            continue
        if isinstance(value, (int, float)) and not isinstance(value, bool) and not least <= value <= most:
            raise UsageError(_absurd(value, least, most, unit), where=where, field=json_path(path, name))


def _absurd(value: float, least: float, most: float, unit: str) -> str:
    space = "" if unit in ("%", "") else " "     # a count has no unit
    bounds = f"at most {most:g}" if least == 0 else f"{least:g} to {most:g}"
    return (f"{value:g}{space}{unit} is no figure a GPU run gives ({bounds}{space}{unit}): these results were not "
            "written by a run as they are")


def check_text(text: str, value: Any, where: str) -> None:
    """Refuse a string or key of `value` (parsed from the JSON `text`) that holds half of a UTF-16 surrogate pair
    alone: it is no Unicode text, and no output (a terminal, a file, a pipe) could take it."""
    if _SURROGATE_ESCAPE.search(text) is None:     # the one way to spell one: most files need no walk
        return
    try:
        _find_surrogate(value, "", where)
    except RecursionError:
        raise UsageError("not a results file: JSON nested too deeply", where=where) from None


def _find_surrogate(value: Any, path: str, where: str) -> None:
    if isinstance(value, str):
        found = _SURROGATE.search(value)
        if found is not None:
            raise _problem(where, path, f"{ascii(value)[:60]} {_lone_surrogate(found.group())}")
    elif isinstance(value, dict):
        for name, item in value.items():
            found = _SURROGATE.search(name)
            if found is not None:     # the key itself is left out of the path: it cannot be printed
                raise _problem(where, path, f"a key {ascii(name)[:60]} {_lone_surrogate(found.group())}")
            _find_surrogate(item, json_path(path, name), where)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _find_surrogate(item, f"{path}[{index}]", where)


def _lone_surrogate(character: str) -> str:
    return (f"holds \\u{ord(character):04x}, half of a UTF-16 surrogate pair without the other half: not Unicode "
            "text, and not written by driver-gemm")


def json_path(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _is_type(value: Any, name: str) -> bool:
    if name == "null":
        return value is None
    if name == "boolean":
        return isinstance(value, bool)
    if name == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if name == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if name == "string":
        return isinstance(value, str)
    if name == "array":
        return isinstance(value, list)
    return isinstance(value, dict)


def _show(value: Any) -> str:
    text = json.dumps(value) if not isinstance(value, float) or math.isfinite(value) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def check_against_schema(value: Any, schema: dict, where: str) -> None:
    """Check `value` against `schema` (the results schema or one of its ``$defs``); `UsageError` naming `where`."""
    root = results_schema()
    try:
        passes = _passes(schema, root)(value, False)    # the common case, answered without a path per value
    except RecursionError:
        passes = False
    if passes:
        return
    try:
        _check(value, schema, root, "", where)
    except RecursionError:
        raise UsageError("not a results file: JSON nested too deeply", where=where) from None


# ------------------------------------------------------------------------------------ the schema, compiled
#
# `_check` walks a schema as data and builds the JSON path of every value it visits, so that it can name the first
# that fails; over a file of tens of thousands of cases that walk is most of what reading costs. `_passes` compiles
# a schema once into a predicate that answers only whether a value passes: True only where `_check` would raise
# nothing (it is stricter where unsure: a type JSON does not make), and where it says False `_check` walks the value
# again to say what is wrong.

_JSON_TYPES = {"null": (type(None),), "boolean": (bool,), "integer": (int,), "number": (int, float), "string": (str,),
               "array": (list,), "object": (dict,)}
_PARSED = frozenset({type(None), bool, int, float, str, list, dict})
_UNSET = object()
_SIMPLE_KEYS = frozenset({"type", "description", "minimum", "exclusiveMinimum", "maximum"})
_TEXT_TYPES = frozenset({str, bool, type(None)})
_NUMBER_TYPES = frozenset({int, float, type(None)})
_compiled: dict[int, tuple[dict, Any]] = {}     # by id(schema), the schema kept so that its id stays its own


def _passes(schema: dict, root: dict):
    """The predicate of `schema` (a node of `root`, or a schema whose ``$ref``s name nodes of it)."""
    known = _compiled.get(id(schema))
    if known is not None and known[0] is schema:
        return known[1]
    if len(_compiled) > 4096:      # schemas made per call (tests): the cache stays bounded
        _compiled.clear()
    slot: list = []
    _compiled[id(schema)] = (schema, lambda value, finite=False: slot[0](value, finite))   # a $ref back to it
    predicate = _compile(schema, root)
    slot.append(predicate)
    _compiled[id(schema)] = (schema, predicate)
    return predicate


def _compile(schema: dict, root: dict):
    parts = [_passes(_resolved(root, schema["$ref"]), root)] if "$ref" in schema else []
    parts += [_passes(part, root) for part in schema.get("allOf", ())]
    allowed = schema.get("type")
    types = None if allowed is None else frozenset(
        kind for name in ([allowed] if isinstance(allowed, str) else allowed) for kind in _JSON_TYPES[name])
    const, enum = schema.get("const", _UNSET), schema.get("enum")
    low, above, high = schema.get("minimum"), schema.get("exclusiveMinimum"), schema.get("maximum")
    shortest = schema.get("minLength", 0)
    required = tuple(schema.get("required", ()))
    properties = {name: _passes(sub, root) for name, sub in schema.get("properties", {}).items()}
    others = _passes(schema["additionalProperties"], root) if "additionalProperties" in schema else None
    items_schema = schema.get("items")
    items = _passes(items_schema, root) if items_schema is not None else None
    bounded = low is not None or above is not None or high is not None
    simple = _SIMPLE_KEYS.issuperset(schema) and types is not None
    if simple and types <= _TEXT_TYPES:                 # most fields: a string, a boolean, or null
        return lambda value, finite=False: type(value) in types
    if simple and types <= _NUMBER_TYPES:               # the figures: a number in bounds, or null
        def number_passes(value: Any, finite: bool = False) -> bool:
            kind = type(value)
            if kind is float:
                if not math.isfinite(value):
                    return False
            elif kind is int:
                if not -_INT_BOUND < value < _INT_BOUND:
                    return False
            return kind in types and (value is None or not bounded or not (
                (low is not None and value < low) or (above is not None and value <= above)
                or (high is not None and value > high)))
        return number_passes

    def passes(value: Any, finite: bool = False) -> bool:
        """Whether `value` passes; `finite`: every number in it is already known finite and in bounds (a value
        that passed one predicate is so throughout, so that the parts of an ``allOf`` walk it once, not each)."""
        kind = type(value)
        if kind not in _PARSED:
            return False
        for part in parts:
            if not part(value, finite):
                return False
            finite = True
        if types is not None and kind not in types:
            return False
        if kind is float and not math.isfinite(value):
            return False
        if const is not _UNSET and not (value == const):
            return False
        if enum is not None and not any(value == option and kind is type(option) for option in enum):
            return False
        if kind is int or kind is float:
            if kind is int and not -_INT_BOUND < value < _INT_BOUND:
                return False
            if bounded and ((low is not None and value < low) or (above is not None and value <= above)
                            or (high is not None and value > high)):
                return False
        elif kind is str:
            return len(value) >= shortest
        elif kind is dict:
            for name in required:
                if name not in value:
                    return False
            for name, item in value.items():
                check = properties.get(name)
                if check is not None:
                    if not check(item, finite):
                        return False
                elif others is not None:
                    if not others(item, finite):
                        return False
                elif not finite and not _finite_tree(item):
                    return False
        elif kind is list:
            if _plain_numbers(value, items_schema if items_schema is not None else {}):
                return True
            for item in value:
                if not (items(item, finite) if items is not None else finite or _finite_tree(item)):
                    return False
        return True

    return passes


def _finite_tree(value: Any) -> bool:
    """Whether `_check_finite` would pass `value` (False also for a type JSON does not make)."""
    kind = type(value)
    if kind is str or kind is bool or value is None:
        return True
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return -_INT_BOUND < value < _INT_BOUND
    if kind is dict:
        items: Any = value.values()
    elif kind is list:
        if _plain_numbers(value, {}):
            return True
        items = value
    else:
        return False
    for item in items:      # most are text or numbers: told apart here, without a call each
        kind = type(item)
        if kind is str or kind is bool or item is None:
            continue
        if kind is float:
            if not math.isfinite(item):
                return False
        elif kind is int:
            if not -_INT_BOUND < item < _INT_BOUND:
                return False
        elif not _finite_tree(item):
            return False
    return True


def _check(value: Any, schema: dict, root: dict, path: str, where: str) -> None:
    """Check `value` against `schema` (the subset of JSON Schema listed above); raise at the first problem."""
    if "$ref" in schema:
        _check(value, _resolved(root, schema["$ref"]), root, path, where)
    for part in schema.get("allOf", ()):
        _check(value, part, root, path, where)
    if isinstance(value, float) and not math.isfinite(value):
        raise _problem(where, path, _not_finite(value))
    allowed = schema.get("type")
    if allowed is not None and not (_is_type(value, allowed) if isinstance(allowed, str)
                                    else any(_is_type(value, name) for name in allowed)):
        names = [allowed] if isinstance(allowed, str) else allowed
        shown = "" if value is None else f" {_show(value)}"     # null is said once: "got null", not "null null"
        raise _problem(where, path, f"must be {' or '.join(names)}, got {json_type(value)}{shown}")
    if "const" in schema and value != schema["const"]:
        raise _problem(where, path, f"must be {_show(schema['const'])}, got {_show(value)}")
    if "enum" in schema and not any(value == option and type(value) is type(option) for option in schema["enum"]):
        raise _problem(where, path, f"must be one of {', '.join(map(str, schema['enum']))}, got {_show(value)}")
    if _is_type(value, "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise _problem(where, path, f"must be at least {schema['minimum']}, got {_show(value)}")
        if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
            raise _problem(where, path, f"must be greater than {schema['exclusiveMinimum']}, got {_show(value)}")
        if "maximum" in schema and value > schema["maximum"]:
            raise _problem(where, path, f"must be at most {schema['maximum']}, got {_show(value)}")
    if isinstance(value, int) and not -_INT_BOUND < value < _INT_BOUND:   # a float of it would overflow
        raise _problem(where, path, _too_wide(value))
    if isinstance(value, str) and len(value) < schema.get("minLength", 0):
        shortest = schema["minLength"]
        raise _problem(where, path, "must not be empty" if not value or shortest == 1 else
                       f"must be at least {shortest} characters long, got {_show(value)}")
    if isinstance(value, dict):
        missing = [name for name in schema.get("required", ()) if name not in value]
        if missing:
            raise _problem(where, path, f"missing field{'s' if len(missing) > 1 else ''} {', '.join(missing)}")
        properties = schema.get("properties", {})
        for name, sub_schema in properties.items():
            if name in value:
                _check(value[name], sub_schema, root, json_path(path, name), where)
        others = schema.get("additionalProperties")    # a mapping's values (operands.ld: an integer by operand)
        # Values of free-form objects (settings, launch, ...) are not read as numbers, but a NaN there
        # still says the file was not written by driver-gemm, which writes null instead.
        for name, item in value.items():
            if name in properties:
                continue
            if others is not None:
                _check(item, others, root, json_path(path, name), where)
            elif not _plain_scalar(item):
                _check_finite(item, json_path(path, name), where)
    if isinstance(value, list):
        items = schema.get("items")
        if _plain_numbers(value, items if items is not None else {}):
            return          # every item passes: the walk below would only say so, item by item
        for index, item in enumerate(value):
            if items is not None:
                _check(item, items, root, f"{path}[{index}]", where)
            else:
                _check_finite(item, f"{path}[{index}]", where)


_PLAIN_NUMBER_KEYS = frozenset({"type", "minimum", "exclusiveMinimum", "maximum"})


def _plain_numbers(items: list, schema: dict) -> bool:
    """Whether `items` are all numbers that pass `schema` (no schema: any finite number), in one sweep.

    Raw samples run to thousands per case, and walking them item by item is
    most of what reading a large results file costs. False when the schema is
    more than a number's type and bounds, or when any item fails: the caller
    then walks the items and names the first that fails.
    """
    if not _PLAIN_NUMBER_KEYS.issuperset(schema) or schema.get("type", "number") not in ("number", "integer"):
        return False
    integer = schema.get("type") == "integer"
    low, above, high = schema.get("minimum"), schema.get("exclusiveMinimum"), schema.get("maximum")
    for item in items:
        kind = type(item)
        if kind is float:
            if integer or not math.isfinite(item):
                return False
        elif kind is not int or not -_INT_BOUND < item < _INT_BOUND:      # bool is its own type
            return False
        if (low is not None and item < low) or (above is not None and item <= above) or \
                (high is not None and item > high):
            return False
    return True


def _problem(where: str, path: str, message: str) -> UsageError:
    """What is wrong with the value at `path` of the file `where`."""
    return UsageError(message, where=where, field=path or None)


def _resolved(root: dict, reference: str) -> dict:
    """The part of the schema `root` that a ``$ref`` names (``#/$defs/case``)."""
    target = root
    for part in reference.removeprefix("#/").split("/"):
        target = target[part]
    return target


def _not_finite(value: float) -> str:
    return f"{value!r} is not a finite number"


def _too_wide(value: int) -> str:
    return f"a whole number of {value.bit_length()} bits, not written by driver-gemm (64 at most)"


def _check_finite(value: Any, path: str, where: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise _problem(where, path, _not_finite(value))
    if isinstance(value, int) and not -_INT_BOUND < value < _INT_BOUND:
        raise _problem(where, path, _too_wide(value))
    if isinstance(value, dict):
        for name, item in value.items():
            if not _plain_scalar(item):      # the path is built only where there is something to look into
                _check_finite(item, json_path(path, name), where)
    elif isinstance(value, list) and not _plain_numbers(value, {}):
        for index, item in enumerate(value):
            if not _plain_scalar(item):
                _check_finite(item, f"{path}[{index}]", where)


def _plain_scalar(value: Any) -> bool:
    """A value `_check_finite` has nothing to say about: text, null, a boolean, or a number that fits."""
    kind = type(value)
    if kind is float:
        return math.isfinite(value)
    if kind is int:
        return -_INT_BOUND < value < _INT_BOUND
    return kind is str or kind is bool or value is None


def check_results_document(document: Any, text: str, where: str) -> None:
    """A whole results file's JSON `document` (parsed from `text`) checked as `read_results` checks it: a
    `UsageError` at `where`, with the JSON path of the first thing wrong."""
    check_against_schema(document, results_schema(), where)
    for index, case in enumerate(document["cases"]):
        check_case_consistency(case, f"cases[{index}]", where)
    check_run_record(document, where)
    check_text(text, document, where)
    check_repeated_cases(document["cases"], where)
