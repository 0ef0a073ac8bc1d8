"""Performance gates for test rigs: a minimum % of the baseline per case, and no regression against stored results.

Pure (no GPU), over a finished `RunResult`: `min_pct_gate` needs each kernel case to reach a % of
its precision's cuBLAS row (``--driver-gemm-min-pct 80``, ``v8=90``, or a kernel's ``min_pct:``), and
`regression_gate` no SLOWER or BROKEN verdict of `report.comparison` against a stored file. Each
failure names the case, the measured and required figures and the noise (relative IQR), so a real
shortfall can be told from a noisy one. Using them: docs/embedding.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from ..errors import DriverGemmError
from ..results.records import CaseResult, RunResult
from ..status import is_baseline_label
from .comparison import REGRESSIONS, compare_runs


class GateError(DriverGemmError):
    """A gate given something it cannot check (``--driver-gemm-min-pct fast``)."""


@dataclass(frozen=True)
class GateFailure:
    """One case that failed one gate."""

    case: str                   # "LABEL at SHAPE"
    gate: str                   # min-pct | regression
    measured: str
    required: str
    noise: str

    def __str__(self) -> str:
        return f"{self.case}: {self.gate} gate: measured {self.measured}, required {self.required} ({self.noise})"


def _noise(case: CaseResult | None) -> float | None:
    if case is None or case.timing is None or not case.timing.median_ms:
        return None
    return (case.timing.q3_ms - case.timing.q1_ms) / case.timing.median_ms


def _noise_text(*cases: CaseResult | None) -> str:
    parts = [f"{100 * n:.2f}%" for n in map(_noise, cases) if n is not None]
    return "noise " + " / ".join(parts) if parts else "noise unknown (untimed)"


def parse_min_pct(values: list[str]) -> tuple[float | None, dict[str, float]]:
    """``--driver-gemm-min-pct`` values: ``80`` for every kernel, ``v8=90`` for one kernel name (repeatable)."""
    every: float | None = None
    per_kernel: dict[str, float] = {}
    given: dict[str, str] = {}     # by kernel name ("" for every kernel), the value that set it
    for value in values:
        name, _, number = str(value).rpartition("=")
        try:
            pct = float(number)
        except ValueError:
            raise GateError(f"--driver-gemm-min-pct {value!r}: expected a percentage like 80 or NAME=90") from None
        if not 0 < pct < float("inf"):   # also refuses NaN
            raise GateError(f"--driver-gemm-min-pct {value!r}: the percentage must be a number above 0")
        earlier = given.setdefault(name, str(value))
        if earlier != str(value) and (per_kernel.get(name) if name else every) != pct:
            # one of two contradicting values would silently win
            whose = f"kernel {name!r}" if name else "every kernel"
            raise GateError(f"--driver-gemm-min-pct {earlier} and --driver-gemm-min-pct {value}: two percentages "
                            f"for {whose}: give one")
        if name:
            per_kernel[name] = pct
        else:
            every = pct
    return every, per_kernel


def min_pct_gate(run: RunResult, min_pct: float | None = None,
                 per_kernel: Mapping[str, float] | None = None) -> list[GateFailure]:
    """Cases below their required % of the baseline; `per_kernel` (by kernel name) wins over `min_pct`."""
    per_kernel = per_kernel or {}
    failures = []
    for case in run.cases:
        if case.is_baseline:
            continue
        required = per_kernel.get(case.name, min_pct)
        if required is None:
            continue
        where = f"{case.kernel} at {case.shape.label}"
        wanted = f"{required:.1f}% of cuBLAS"
        if not case.ok:
            failures.append(GateFailure(where, "min-pct", f"status {case.status}", wanted, _noise_text(case)))
        elif case.pct_cublas is None:
            failures.append(GateFailure(where, "min-pct", "no % of cuBLAS (untimed, or no baseline row)", wanted,
                                        _noise_text(case)))
        elif case.pct_cublas < required:
            failures.append(GateFailure(where, "min-pct", f"{case.pct_cublas:.1f}% of cuBLAS "
                                        f"({case.timing.median_ms:.4g} ms)", wanted, _noise_text(case)))
    return failures


def gpu_models(run: RunResult) -> list[str]:
    """The names of the GPUs that ran `run`'s cases, each once, in the order met."""
    return list(dict.fromkeys(case.device.name for case in run.cases if case.device.name))


def _across_text(option: str | None, joined: str = " (or") -> str:
    """The offer of a comparison across GPU models, where the caller has an option for it."""
    if option is None:
        return ""
    return f"{joined} {option} to compare across GPU models" + (")" if joined.startswith(" (") else "")


def _models_text(names) -> str:
    return " and ".join(names) if names else "no recorded GPU"


def regression_gate(run: RunResult, stored: RunResult, threshold: float = 0.0,
                    across_gpus: bool = False, across_option: str | None = "--across-gpus") -> list[GateFailure]:
    """Cases SLOWER (beyond both runs' noise and `threshold`) or BROKEN against the `stored` results.

    Where no case of `run` has a stored counterpart (cases match by kernel, shape and GPU model, or by kernel and
    shape `across_gpus`), every kernel case of `run` fails, saying that nothing was compared and on which GPUs:
    a gate that compared nothing must not hold. `across_option` is the option that asks for `across_gpus` (None
    where the caller has none to offer).
    """
    comparisons = compare_runs(stored, run, threshold=threshold, across_gpus=across_gpus)
    if run.cases and not any(c.old is not None and c.new is not None for c in comparisons):
        return _compared_nothing(run, stored, across_gpus, across_option)
    failures = []
    for comparison in comparisons:
        if comparison.verdict not in REGRESSIONS:
            continue
        old, new = comparison.old, comparison.new
        where = f"{comparison.kernel} at {comparison.shape}"
        if comparison.change is None:     # BROKEN
            failures.append(GateFailure(where, "regression", f"status {new.status}",
                                        f"status {old.status} as in the stored results", _noise_text(old, new)))
        else:
            failures.append(GateFailure(
                where, "regression", f"{new.timing.median_ms:.4g} ms ({100 * comparison.change:+.1f}%)",
                f"at most {old.timing.median_ms:.4g} ms within noise" +
                (f" + {100 * threshold:.1f}%" if threshold else ""), _noise_text(old, new)))
    return failures


def _compared_nothing(run: RunResult, stored: RunResult, across_gpus: bool,
                      across_option: str | None) -> list[GateFailure]:
    """A failure for each kernel case of `run` (each case, where it has none) when no case met a stored one."""
    ours, theirs = gpu_models(run), gpu_models(stored)
    across = [] if across_gpus else compare_runs(stored, run, across_gpus=True)
    if any(c.old is not None and c.new is not None for c in across):     # they would match on another GPU model
        why = (f"the stored results are of {_models_text(theirs)}, this run of {_models_text(ours)}, and cases "
               "match on the same GPU model")
        required = f"stored results of {_models_text(ours)}{_across_text(across_option)}"
    else:
        why = "no case of the stored results is a case of this run"
        required = "stored results of the same kernels and shapes"
    cases = [case for case in run.cases if not case.is_baseline] or run.cases
    return [GateFailure(f"{case.kernel} at {case.shape.label}", "regression", f"nothing ({why})", required,
                        _noise_text(case)) for case in cases]


def check_gates(run: RunResult, *, min_pct: float | None = None, per_kernel: Mapping[str, float] | None = None,
                stored: RunResult | None = None, threshold: float = 0.0, across_gpus: bool = False,
                across_option: str | None = "--across-gpus") -> list[GateFailure]:
    """Every gate asked for, over `run`: the minimum % first, then regressions against `stored` (matched by GPU
    model unless `across_gpus`; see `regression_gate`)."""
    failures = min_pct_gate(run, min_pct, per_kernel)
    if stored is not None:
        failures += regression_gate(run, stored, threshold, across_gpus, across_option)
    return failures


def check_gate_names(per_kernel: Mapping[str, float], kernel_names) -> None:
    """Refuse a per-kernel gate (``v8=90``) naming no kernel of the spec: it would hold without checking anything."""
    names = set(kernel_names)
    for name in per_kernel:
        if name not in names:
            raise GateError(f"--driver-gemm-min-pct {name}=...: no kernel named {name!r} "
                            f"(kernels: {', '.join(sorted(names))})")


def check_stored_matches(stored: RunResult, case_keys,
                         consequence: str = "the regression gate would compare nothing", *,
                         gpus: list[str] | None = None, across_gpus: bool = False,
                         across_option: str | None = "--across-gpus") -> None:
    """Refuse stored results that share no (kernel, shape) case with the run (another spec's, say): a gate over
    them would hold without checking anything. `case_keys` are the run's (label, shape label) pairs, cuBLAS
    rows included. Where the run has kernel cases, one of them must be there: cuBLAS rows alone (the same shapes
    of another spec) would leave every kernel unchecked. Where the run's GPU models are known (`gpus`), that case
    must be of one of them, as `compare` matches cases, unless `across_gpus` (asked for by `across_option`)."""
    keys = set(case_keys)
    kernel_keys = {key for key in keys if not is_baseline_label(key[0])}
    matching = [case for case in stored.cases if (case.kernel, case.shape.label) in (kernel_keys or keys)]
    spec = f" (spec {stored.spec!r})" if stored.spec else ""
    if not matching:
        raise GateError(f"no case of these results{spec} is a case of this run: {consequence} (give results of "
                        "the same spec, kernels and shapes)")
    if gpus and not across_gpus and not any(case.device.name in gpus for case in matching):
        theirs = list(dict.fromkeys(case.device.name or "no recorded GPU" for case in matching))
        raise GateError(f"these results{spec} were measured on {_models_text(theirs)}, this run is on "
                        f"{_models_text(gpus)}, and cases match on the same GPU model: {consequence} (give results "
                        f"of {_models_text(gpus)}{_across_text(across_option, ', or')})")


def kernel_min_pcts(kernels, overrides: Mapping[str, float] | None = None) -> dict[str, float]:
    """Per kernel name, the % of cuBLAS it must reach: each kernel's ``min_pct:``, then `overrides` (by name)."""
    required = {kernel.name: kernel.min_pct for kernel in kernels if getattr(kernel, "min_pct", None)}
    required.update(overrides or {})
    return required
