"""Render docs/performance.md from one GPU's headline results (the files scripts/regenerate.py writes).

usage: python3 scripts/render_performance.py bench/results/nvidia-h200 > docs/performance.md

Runs anywhere (no GPU): it only reads the results files, with driver-gemm's own reader for run results.
Every table names the file it comes from, the command that made it, and when, where and with what it
ran (GPU, driver, NVRTC and cuBLAS versions, each case's SM clock). A headline whose file is missing is
said to be not regenerated on that machine, with no figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import json
import sys
import zlib
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from regenerate import MANIFEST, STEPS, Step, command_line  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REGENERATE = "python3 scripts/regenerate.py"


def shown_path(folder: Path, name: str) -> str:
    """Where the file is committed: bench/results/<gpu-name>/NAME, wherever the folder is read from."""
    return f"bench/results/{folder.resolve().name}/{name}"


def found_file(folder: Path, step: Step) -> Path | None:
    for name in (step.file, f"{step.name}.jsonl.gz"):
        if (folder / name).exists():
            return folder / name
    return None


def read_json(path: Path) -> dict:
    """A JSON file of the folder that is not a run's results (the manifest, a check's listing or figures), gzipped
    or not; one that cannot be read is a `UsageError` naming it, as the results files' reader names a bad file."""
    from driver_gemm.errors import UsageError

    try:
        data = path.read_bytes()
        return json.loads(gzip.decompress(data) if path.suffix == ".gz" else data)
    except (OSError, EOFError, zlib.error, ValueError, RecursionError) as error:   # gzip.BadGzipFile is an OSError
        raise UsageError(f"cannot be read as JSON: {error}", where=str(path)) from None


def driver_text(version) -> str:
    """A CUDA driver version as the driver reports it (13000) in the usual form (13.0)."""
    if not isinstance(version, int):
        return str(version) if version else "?"
    return f"{version // 1000}.{version % 1000 // 10}"


def ms(value) -> str:
    if value is None:
        return "-"
    return f"{value:.4f}" if value < 10 else f"{value:,.1f}"


def fixed(value, digits: int) -> str:
    return "-" if value is None else f"{value:,.{digits}f}"


def table(header, rows) -> list[str]:
    def line(cells):
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), "|" + "---|" * len(header), *(line(row) for row in rows), ""]


def where_run(environment: dict, started: str) -> str:
    """The line that says when, on what and with what versions a run ran."""
    device = environment.get("device") or {}
    gpu = device.get("name") or environment.get("gpu") or "?"
    if device.get("sm_count"):
        gpu += f" ({device['sm_count']} SMs, {device.get('arch', '?')})"
    parts = [f"ran {started or '?'}", f"GPU {gpu}",
             f"driver {driver_text(environment.get('driver_version') or device.get('driver_version'))}",
             f"NVRTC {environment.get('nvrtc_version', '?')}",
             f"cuBLAS through nvmath-python {environment.get('nvmath_python') or '?'}"]
    for key, label in (("cuda_bindings", "cuda-bindings"), ("torch", "torch"), ("triton", "triton")):
        if environment.get(key):
            parts.append(f"{label} {environment[key]}")
    if environment.get("host"):
        parts.append(f"host {environment['host']}")
    return ", ".join(parts)


def provenance(folder: Path, path: Path, step: Step, record: dict) -> list[str]:
    command = record.get("command") or " ".join(command_line(step, f"{step.name}.json"))
    lines = [f"- file: `{shown_path(folder, path.name)}`",
             f"- command: `{command}` (step `{step.name}` of `{REGENERATE}`)"]
    if "exit_code" in record:
        lines.append(f"- exit status {record['exit_code']} after {record['seconds']} s"
                     + (f", cut short by its {record['timeout_s']} s timeout" if record.get("timed_out") else ""))
    return lines


def run_section(folder: Path, path: Path, step: Step, record: dict) -> list[str]:
    import driver_gemm as dg

    run = dg.load_results(path)
    return provenance(folder, path, step, record) + run_tables(run)


def where_lines(run, cut_short: str) -> list[str]:
    """The line saying where `run` ran, `cut_short` after it if the run was interrupted, and a blank line."""
    return [f"- {where_run(run.environment, run.started)}", *([f"- {cut_short}"] if run.interrupted else []), ""]


def run_tables(run) -> list[str]:
    """Where a run ran, then one table per shape of its cases, with the vendor rows' algorithms, the times
    behind the % of each kernel timed in rounds with its vendor row, and the cluster launches that took more waves
    than their blocks would have alone."""
    from driver_gemm.report.notes import algorithm_notes, residency_notes, rounds_notes

    lines = where_lines(run, "the run was interrupted: the table holds the cases it finished")
    for shape in dict.fromkeys(case.shape for case in run.cases):
        rows, cases = [], [case for case in run.cases if case.shape == shape]
        for case in cases:
            timing = case.timing
            clock = timing.sm_clock_mhz if timing else None
            rows.append((case.kernel, str(case.status),
                         ms(case.median_ms), fixed(case.gflops, 0), fixed(case.pct_cublas, 1),
                         "" if case.is_baseline else (case.baseline_label or "-"), fixed(clock, 0)))
        lines += table((shape.label, "status", "median ms", "GFLOP/s", "% of cuBLAS", "of", "SM MHz"), rows)
        notes = algorithm_notes(run, shape) + rounds_notes(cases) + residency_notes(cases)
        if notes:
            lines += [f"- {note}" for note in notes] + [""]
    return lines


def kernel_and_params(case) -> tuple[str, str]:
    """A case's kernel name and its params as its label writes them: ``v13[BN=64,CWG=1]`` -> (v13, BN=64,CWG=1)."""
    name, _, params = case.kernel.partition("[")
    return name, params.rstrip("]")


def tune_tables(run) -> list[str]:
    """A tuning run, compactly: per kernel and shape, how many configurations were fully measured, the fastest that
    passed and the runner-up, each with its % of cuBLAS (of the vendor row measured in the same run)."""
    lines = where_lines(run, "the run was interrupted: the table holds the cases it finished")
    measured: dict = {}
    for case in run.cases:
        if not case.is_baseline and case.median_ms is not None:
            name, params = kernel_and_params(case)
            measured.setdefault(name, {}).setdefault(case.shape.label, []).append((case, params))
    for name, shapes in measured.items():
        rows = []
        for label, found in shapes.items():
            passed = sorted(((case.median_ms, case.pct_cublas, params) for case, params in found if case.ok),
                            key=lambda row: row[0])
            best = passed[0] if passed else (None, None, "-")
            second = next((row for row in passed[1:] if row[2] != best[2]), (None, None, "-"))
            rows.append((label, len({params for _, params in found}), best[2], ms(best[0]), fixed(best[1], 1),
                         second[2], fixed(second[1], 1)))
        lines += table((f"{name}: shape", "configurations fully measured", "fastest", "median ms", "% of cuBLAS",
                        "runner-up", "its % of cuBLAS"), rows)
    return lines


def joined_run(folder: Path, file: Path, parts: list[str]):
    """A run and the cases of the other parts of the same step (a suite's small and large shapes, each run under a
    timeout of its own, or one command's runs of several shapes), as one run; a part that is missing adds nothing.
    The tables keep a shape's last case of a kernel, so a later part's case of a shape replaces an earlier one's."""
    import driver_gemm as dg

    run = dg.load_results(file)
    cases = list(run.cases)
    for part in parts:
        if (folder / part).exists():
            cases += dg.load_results(folder / part).cases
    return dataclasses.replace(run, cases=cases)


def suite_tables(run, before=None, kernels=()) -> list[str]:
    """A shape suite, compactly: per kernel (its parameters aside; a dispatched family as one, whichever of its
    kernels a shape ran), each shape's % of cuBLAS and the configuration its dispatch chose, beside the same from
    `before` (a run of the suite with another dispatch) where given; each kernel's geometric mean over the shapes
    both runs finished last. `kernels` (names) limits the tables to those, where given."""
    from driver_gemm.report.tables import geometric_mean

    def by_kernel(result) -> dict:
        found: dict = {}
        for case in result.cases:
            if case.is_baseline or case.pct_cublas is None:
                continue
            name, params = kernel_and_params(case)
            family = case.name if case.dispatch is not None else name
            if kernels and family not in kernels:
                continue
            shown = params if name == family else case.kernel     # a member of the family: its whole label
            found.setdefault(family, {})[case.shape.label] = (case.pct_cublas, shown)
        return found

    now, then = by_kernel(run), by_kernel(before) if before is not None else {}
    lines = where_lines(run, "the run was cut short by its timeout: the tables hold the shapes it finished")
    rounds = sorted({case.timed_in_rounds.rounds for case in run.cases if case.timed_in_rounds is not None})
    if rounds:
        lines[-1:-1] = [f"- each kernel timed in {' or '.join(map(str, rounds))} rounds alternating with its vendor "
                        "row (measure.rounds): its % of cuBLAS is the vendor's median over those rounds over its own"]
    for name, shapes in now.items():
        earlier = then.get(name, {})
        rows = []
        for label, (pct, params) in shapes.items():
            old = earlier.get(label)
            before_cells = ((fixed(old[0], 1), old[1]) if old else ("-", "-")) if then else ()
            rows.append((label, *before_cells, fixed(pct, 1), params))
        header = (f"{name}: shape", *(("% of cuBLAS before", "its params") if then else ()), "% of cuBLAS",
                  "params")
        lines += table(header, rows)
        common = [label for label in shapes if not then or label in earlier]
        if common:
            mean = geometric_mean([shapes[label][0] for label in common])
            text = f"- geometric mean over {len(common)} shape{'s' if len(common) != 1 else ''}: {mean:.1f}%"
            if then:
                text += f" (before: {geometric_mean([earlier[label][0] for label in common]):.1f}%)"
            lines.append(text)
            if len(common) < len(shapes):
                lines.append(f"- geometric mean over all {len(shapes)} shapes of this run: "
                             f"{geometric_mean([pct for pct, _ in shapes.values()]):.1f}%")
            lowest = min(shapes, key=lambda label: shapes[label][0])
            lines.append(f"- lowest: {shapes[lowest][0]:.1f}% at {lowest}")
            lines.append("")
    return lines


def baselines_section(folder: Path, path: Path, step: Step, record: dict) -> list[str]:
    data = read_json(path)
    return provenance(folder, path, step, record) + baseline_tables(data)


def baseline_tables(data: dict) -> list[str]:
    """A baseline_check.py file: where it ran, how, and one row per case (with its sample pattern if chosen)."""
    lines = []
    if data.get("environment"):
        lines.append(f"- {where_run(data['environment'], data['environment'].get('started', ''))}")
    lines.append(f"- {data.get('rounds', '?')} interleaved rounds per case, each side the median of its rounds' "
                 f"medians; agreement asked for: {data.get('limit_pct', '?')}%; maximum SM clock "
                 f"{fixed(data.get('max_sm_clock_mhz'), 0)} MHz"
                 + (f", locked at {data['locked_sm_clock_mhz']} MHz" if data.get("locked_sm_clock_mhz") else ""))
    lines.append("")
    patterns = any(case.get("samples") for case in data.get("cases", []))
    rows = [(case.get("combination"), case.get("layout"), case.get("shape"),
             *((case.get("samples") or "flush",) if patterns else ()), ms(case.get("ours_ms")),
             ms(case.get("torch_ms")), fixed(100 * case["ratio"] if case.get("ratio") else None, 1),
             fixed(case.get("ours_mhz"), 0), fixed(case.get("torch_mhz"), 0), case.get("torch_timer") or "-",
             "yes" if case.get("within_limit") else "no", case.get("error") or case.get("check") or "-")
            for case in data.get("cases", [])]
    if rows:
        lines += table(("types", "layout", "shape", *(("our samples",) if patterns else ()), "ours ms",
                        "torch ms", "ours / torch %", "ours MHz",
                        "torch MHz", "torch timer", "within limit", "check"), rows)
    kernel_rows = [(case.get("kernel"), case.get("shape"), case.get("samples") or "flush", ms(case.get("ours_ms")),
                    ms(case.get("torch_ms")), fixed(case.get("pct_of_torch"), 1), fixed(case.get("ours_mhz"), 0),
                    fixed(case.get("torch_mhz"), 0), case.get("torch_op") or "-", case.get("torch_timer") or "-",
                    case.get("error") or case.get("check") or "-")
                   for case in data.get("kernel_cases", [])]
    if kernel_rows:     # --kernel: a spec kernel against torch's op on the same tensors; % of torch = torch / ours
        lines += table(("kernel", "shape", "our samples", "ours ms", "torch ms", "% of torch", "ours MHz",
                        "torch MHz", "torch op", "torch timer", "check"), kernel_rows)
    return lines


def two_gpus_section(folder: Path, path: Path, step: Step, record: dict) -> list[str]:
    data = read_json(path)
    lines = provenance(folder, path, step, record)
    environment = data.pop("environment", None)
    if environment:
        lines.append(f"- {where_run(environment, environment.get('started', ''))}")
    lines.append("- seconds from the command's start to its exit, the spec run on GPU 0 alone and on GPUs 0 and 1; "
                 "the model is the scheduler's prediction from the one-GPU run's launch times")
    lines.append("")
    rows = [(name, fixed(entry.get("one_gpu_s"), 1), fixed(entry.get("two_gpus_s"), 1),
             fixed(entry.get("speedup"), 2), fixed((entry.get("model") or {}).get("one_gpu_s"), 1),
             fixed((entry.get("model") or {}).get("two_gpus_s"), 1))
            for name, entry in data.items() if isinstance(entry, dict) and "speedup" in entry]
    return lines + table(("spec", "one GPU s", "two GPUs s", "speed-up", "model: one GPU s", "model: two GPUs s"),
                         rows)


SECTIONS = {"baselines": baselines_section, "two-gpus": two_gpus_section}


def not_regenerated(folder: Path, step: Step, record: dict) -> list[str]:
    if record.get("skipped"):
        why = record["skipped"]
    elif "exit_code" in record:
        why = (f"its command exited with {record['exit_code']} after {record['seconds']} s"
               + (" (timed out)" if record.get("timed_out") else "") + " and wrote no results")
    else:
        why = "no results file"
    command = record.get("command") or " ".join(command_line(step, f"{step.name}.json"))
    return [f"Not regenerated on this machine: {why}. No figure is shown. It is made by `{command}` "
            f"(step `{step.name}` of `{REGENERATE}`) into `{shown_path(folder, step.file)}`.", ""]


CHECKS = "checks.json"


def checks_section(folder: Path) -> list[str]:
    """The measurements made beside the headlines (listed in checks.json, each with its file and command)."""
    import driver_gemm as dg

    path = folder / CHECKS
    if not path.exists():
        return []
    listing = read_json(path)
    lines = ["## Focused checks", "", f"{listing.get('about', '')} They are listed in `{shown_path(folder, CHECKS)}` "
             "and are not remade by the regenerating command: each is remade by its own.", ""]
    for check in listing.get("checks", []):
        file = folder / check["file"]
        files = [check["file"], *check.get("parts", [])]
        lines += [f"### {check['title']}", "",
                  f"- file{'s' if len(files) > 1 else ''}: {', '.join(f'`{shown_path(folder, name)}`' for name in files)}",
                  f"- command: `{check['command']}`", f"- made {check.get('date', '?')}"]
        if check.get("note"):
            lines.append(f"- {check['note']}")
        if not file.exists():
            lines += ["- the file is missing: no figure is shown", ""]
            continue
        kind = check.get("kind", "run")
        if kind == "run":
            lines += run_tables(joined_run(folder, file, check.get("parts", [])))
        elif kind == "suite":
            before = folder / check["before"] if check.get("before") else None
            lines += suite_tables(joined_run(folder, file, check.get("parts", [])),
                                  dg.load_results(before) if before is not None and before.exists() else None,
                                  check.get("kernels", ()))
        elif kind == "tune":
            lines += tune_tables(dg.load_results(file))
        elif kind == "baseline-check":
            lines += baseline_tables(read_json(file))
        elif kind == "cupti-check":
            data = read_json(file)
            rows = [(shape, ms(case.get("events_ms")), ms(case.get("cupti_ms")), ms(case.get("profiler_ms")),
                     case.get("check") or "-") for shape, case in data.get("cases", {}).items()]
            lines += ["", *table(("shape", "events ms", "CUPTI ms", "torch.profiler ms", "check"), rows)]
        elif kind == "kernel-durations":
            lines += ["", *kernel_duration_table(read_json(file))]
        elif kind == "read-ceiling":
            lines += ["", *read_ceiling_table(read_json(file))]
        else:   # a log: its text as the command printed it
            text = gzip.decompress(file.read_bytes()).decode(errors="replace").rstrip()
            lines += ["", "```", *text.splitlines(), "```", ""]
    return lines


def kernel_duration_table(data: dict) -> list[str]:
    """scripts/kernel_durations.py's rows: each case's event median beside its kernels' own median duration, and the
    vendor row's kernel-only time over the case's."""
    def pct(value):
        return "-" if value is None else f"{fixed(value, 1)}%"

    rows = [(row["shape"], row["case"], fixed(row.get("event_us"), 2), fixed(row.get("kernel_us"), 2),
             fixed(row.get("front_end_us"), 2), pct(row.get("pct_vendor_events")),
             pct(row.get("pct_vendor_kernels_only")), row.get("vendor_kernel", "")) for row in data.get("rows", [])]
    return table(("shape", "case", "events us", "kernel us", "front end us", "% vendor, events",
                  "% vendor, kernels only", "vendor kernel"), rows)


def read_ceiling_table(data: dict) -> list[str]:
    """scripts/read_ceiling.py's rows: B read whole beside torch.mm, both under do_bench, then both as graphs."""
    def ratio(row):
        return fixed(row["mm_us"] / row["read_us"], 3) if row.get("read_us") and row.get("mm_us") else "-"

    rows = [(row["shape"], fixed(row.get("b_bytes", 0) / 1e6, 1), fixed(row.get("read_us"), 1),
             fixed(row.get("read_tb_s"), 2), fixed(row.get("mm_us"), 1), ratio(row), fixed(row.get("read_graph_us"), 1),
             fixed(row.get("read_graph_tb_s"), 2), fixed(row.get("mm_graph_us"), 1)) for row in data.get("rows", [])]
    return table(("shape", "B MB", "read us", "read TB/s", "torch.mm us", "mm / read", "read us, graph",
                  "read TB/s, graph", "torch.mm us, graph"), rows)


TEST_LOG = "gpu-tests.log.gz"
TEST_COMMAND = "scripts/gpu_check.sh tests"


def test_log_section(folder: Path) -> list[str]:
    """The GPU test suite's log, where one is kept beside the results: its file, command and summary line."""
    path = folder / TEST_LOG
    if not path.exists():
        return []
    lines = gzip.decompress(path.read_bytes()).decode(errors="replace").splitlines()
    summary = next((line.strip("= ") for line in reversed(lines) if " in " in line and
                    any(word in line for word in ("passed", "failed", "error"))), "no summary line")
    return ["## GPU test suite", "", f"- file: `{shown_path(folder, TEST_LOG)}`",
            f"- command: `{TEST_COMMAND}` (`python3 -m pytest -q -m gpu tests`), its log gzip-compressed", "",
            f"Summary: {summary}.", ""]


def render(folder: Path) -> str:
    """The whole page, from the results in `folder` (one GPU's: bench/results/<gpu-name>/)."""
    folder = Path(folder)
    manifest = read_json(folder / MANIFEST) if (folder / MANIFEST).exists() else {}
    records = {record["name"]: record for record in manifest.get("steps", [])}
    lines = ["# Performance", "",
             "<!-- Generated: do not edit. Rendered by "
             f"`python3 scripts/render_performance.py {shown_path(folder, '')[:-1]} > docs/performance.md`. -->", "",
             f"The headline results on one GPU, as recorded in `{shown_path(folder, '')}`. They are regenerated on "
             f"a GPU machine by one command, `. scripts/gpu_env.sh && {REGENERATE}` (about 6 minutes on an H200), "
             "which writes the results files and renders this page from them; "
             f"`python3 scripts/render_performance.py {shown_path(folder, '')[:-1]}` renders it again from the "
             "committed files, without a GPU.", "",
             "Each table names its results file and the command that made it; `driver-gemm show FILE` prints any "
             "run's file in full. Times are medians of L2-flushed samples; % of cuBLAS is of the row named in "
             "the `of` column, timed in the same run; SM MHz is the median SM clock while the case was timed.", ""]
    if manifest:
        lines += [f"Regenerated {manifest.get('started', '?')} to {manifest.get('finished', '?')} on "
                  f"{len(manifest.get('gpus', []))} GPU(s): {', '.join(manifest.get('gpus', []))}.", ""]
    for step in STEPS:
        lines += [f"## {step.title}", ""]
        record = records.get(step.name, {})
        path = found_file(folder, step)
        if path is None:
            lines += not_regenerated(folder, step, record)
            continue
        lines += SECTIONS.get(step.name, run_section)(folder, path, step, record)
    lines += checks_section(folder)
    lines += test_log_section(folder)
    return "\n".join(lines).rstrip() + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="one GPU's results folder, e.g. bench/results/nvidia-h200")
    parser.add_argument("-o", "--output", type=Path, help="write the page here (default: standard output)")
    args = parser.parse_args(argv)
    if not args.folder.is_dir():
        parser.error(f"{args.folder}: not a folder")
    from driver_gemm.errors import DriverGemmError

    try:
        page = render(args.folder)
    except DriverGemmError as error:    # a file of the folder that cannot be read: named, with its line or field
        parser.exit(2, f"{parser.prog}: {error}\n")
    if args.output:
        args.output.write_text(page)
    else:
        sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
