"""The vendor row's algorithm: ``--baseline best[:N]`` and ``heuristic`` read and refused, the fastest candidate
kept by a screen there and back and a final A B B A between its two fastest (ties to the heuristic's earlier one,
refused ones passed over, a steady drift of the clock favouring none), each candidate read from a fake cuBLASLt
(rank, tile, stages, split-K, its own algo pointer at launch, the workspace), and the record through results
files and their schema."""

from __future__ import annotations

import json
from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from driver_gemm.measure import cublaslt
from driver_gemm.measure.cublaslt import CublasLtUnsupported, plan_matmul
from driver_gemm.measure.vendor_choice import (AlgorithmChoice, BaselineChoice, choose_candidate, final_settings,
                                               pick_fastest, preselect_settings)
from driver_gemm.gemm.dtypes import parse_types
from driver_gemm.gemm.operands import gemm_operands, parse_layout
from driver_gemm.specfile.model import MeasureSettings


@pytest.mark.parametrize("text, mode, requested", [("best", "best", 8), ("best:3", "best", 3), ("best:1", "best", 1),
                                                   ("heuristic", "heuristic", 1), (" best:64 ", "best", 64)])
def test_choices_are_read(text, mode, requested):
    choice = BaselineChoice.parse(text)
    assert (choice.mode, choice.requested) == (mode, requested)
    assert BaselineChoice.parse(choice.label) == choice


@pytest.mark.parametrize("text", ["", "fastest", "best:0", "best:65", "best:x", "heuristic:2", "best:-1", "best:٣"])
def test_other_choices_are_refused_saying_what_is_accepted(text):
    with pytest.raises(ValueError, match="best, best:N .* or heuristic"):
        BaselineChoice.parse(text)


def test_the_settings_record_says_the_choice_and_the_preselection():
    assert BaselineChoice.parse("heuristic").as_json() == {"choice": "heuristic", "candidates": 1}
    best = BaselineChoice.parse("best:4").as_json()
    assert best["choice"] == "best" and best["candidates"] == 4 and best["preselect"]["min_samples"] > 0
    assert best["preselect"]["rounds"] == 2 and best["final"]["finalists"] == 2 and best["final"]["order"] == "ABBA"


def test_the_fastest_wins_a_tie_keeps_the_heuristics_order_and_failures_are_passed_over():
    assert pick_fastest([0.3, 0.2, 0.25]) == 1
    assert pick_fastest([0.2, 0.2, 0.1 + 0.1]) == 0
    assert pick_fastest([None, 0.5, float("nan"), 0.4]) == 3
    with pytest.raises(ValueError):
        pick_fastest([None, None])


def test_the_preselection_keeps_the_pattern_and_shortens_the_time():
    settings = MeasureSettings(flush_l2=False, mode="graph", min_samples=50, min_time_s=2.0, timeout_s=10.0)
    short = preselect_settings(settings)
    final = final_settings(settings)
    for shortened in (short, final):
        assert (shortened.flush_l2, shortened.mode, shortened.max_noise) == (False, "graph", settings.max_noise)
        assert shortened.samples == "flush" and shortened.warmup >= 1
    assert short.min_samples <= 5 and short.min_time_s <= 0.025 and short.timeout_s <= 0.25
    assert short.min_time_s < final.min_time_s <= 0.1 and final.min_samples <= 10 and final.timeout_s <= 0.5
    brief = MeasureSettings(min_samples=3, min_time_s=0.01, timeout_s=0.2)   # a case measured for less than a final
    assert (final_settings(brief).min_samples, final_settings(brief).min_time_s) == (3, 0.01)
    for shorten in (preselect_settings, final_settings):
        assert shorten(MeasureSettings(samples="burst:8:5000")).samples == "burst:8:100"
        assert shorten(MeasureSettings(samples="flush-idle:2")).samples == "flush-idle:2"


@dataclass
class FakeCandidate:
    launch: object
    algorithm: AlgorithmChoice


def candidates(count):
    return [FakeCandidate(f"launch{rank}", AlgorithmChoice(rank=rank, algo_id=60 + rank, candidates=count))
            for rank in range(1, count + 1)]


def test_best_screens_every_candidate_there_and_back_then_times_the_two_fastest_abba():
    medians = {"launch1": 0.21, "launch2": 0.19, "launch3": 0.20}
    screened, finals = [], []

    def time_screen(launch):
        screened.append(launch)
        return medians[launch]

    def time_final(launch):
        finals.append(launch)
        return medians[launch] * 10

    chosen = choose_candidate(candidates(3), time_screen, BaselineChoice.parse("best:3"), time_final=time_final)
    assert screened == ["launch1", "launch2", "launch3", "launch3", "launch2", "launch1"]
    assert finals == ["launch2", "launch3", "launch3", "launch2"]
    assert chosen.launch == "launch2"
    assert (chosen.algorithm.rank, chosen.algorithm.algo_id, chosen.algorithm.choice) == (2, 62, "best")
    assert chosen.algorithm.candidates == 3 and chosen.algorithm.preselect_ms == (0.21, 0.19, 0.2)
    assert chosen.algorithm.final_ms == (None, 1.9, 2.0)
    assert chosen.algorithm.describe().startswith("best of 3: heuristic #2, algo 62")


def test_the_final_decides_between_the_screens_two_fastest():
    # The screen's fastest (a short burst) is slower under the final's longer load: the final's winner runs.
    screen = {"launch1": 0.30, "launch2": 0.20, "launch3": 0.21}
    final = {"launch2": 0.25, "launch3": 0.22}
    chosen = choose_candidate(candidates(3), screen.get, BaselineChoice.parse("best:3"), time_final=final.get)
    assert chosen.launch == "launch3" and chosen.algorithm.final_ms == (None, 0.25, 0.22)
    # A tie in the final keeps the screen's faster.
    tie = {"launch2": 0.22, "launch3": 0.22}
    assert choose_candidate(candidates(3), screen.get, BaselineChoice.parse("best:3"),
                            time_final=tie.get).launch == "launch2"


def test_a_clock_drifting_steadily_over_the_preselection_favours_no_candidate():
    # The GPU heats as it runs: every timing 5% slower than the one before. Timed once each in heuristic order,
    # the first candidate (1.00) would beat the truly fastest, the second (0.97 x 1.05 = 1.0185); there and back,
    # each candidate's mean step is the same, and the final's A B B A keeps that.
    truth = {"launch1": 1.00, "launch2": 0.97, "launch3": 1.05}
    steps = []

    def drifting(launch):
        steps.append(launch)
        return truth[launch] * (1 + 0.05 * (len(steps) - 1))

    chosen = choose_candidate(candidates(3), drifting, BaselineChoice.parse("best:3"))
    assert chosen.launch == "launch2"
    assert steps[6:] == ["launch2", "launch1", "launch1", "launch2"]
    once = [truth[name] * (1 + 0.05 * step) for step, name in enumerate(truth)]
    assert pick_fastest(once) == 0          # what a single pass in order would have kept


def test_the_heuristic_choice_and_a_single_candidate_are_not_timed():
    def time_one(launch):
        raise AssertionError("timed")

    chosen = choose_candidate(candidates(1), time_one, BaselineChoice.parse("best:8"))
    assert chosen.algorithm.rank == 1 and chosen.algorithm.candidates == 1
    chosen = choose_candidate(candidates(1), time_one, BaselineChoice.parse("heuristic"))
    assert chosen.algorithm.choice == "heuristic" and chosen.algorithm.describe().startswith("heuristic #1")


def test_a_refused_candidate_is_passed_over_and_all_refused_raise_the_first_refusal():
    def refuse(names):
        def time_one(launch):
            if launch in names:
                raise CublasLtUnsupported("x", f"{launch} refused")
            return 0.1 if launch == "launch3" else 0.2
        return time_one

    chosen = choose_candidate(candidates(3), refuse({"launch3"}), BaselineChoice.parse("best"),
                              refused=(CublasLtUnsupported,))
    assert chosen.launch == "launch1" and chosen.algorithm.preselect_ms == (0.2, 0.2, None)
    assert chosen.algorithm.final_ms == (0.2, 0.2, None)
    # one candidate left after the refusals: no final
    alone = choose_candidate(candidates(3), refuse({"launch1", "launch3"}), BaselineChoice.parse("best"),
                             refused=(CublasLtUnsupported,))
    assert alone.launch == "launch2" and alone.algorithm.final_ms == (None, None, None)
    with pytest.raises(CublasLtUnsupported, match="launch1 refused"):
        choose_candidate(candidates(2), refuse({"launch1", "launch2"}), BaselineChoice.parse("best"),
                         refused=(CublasLtUnsupported,))
    with pytest.raises(RuntimeError):      # anything else is not a refusal
        choose_candidate(candidates(2), lambda launch: (_ for _ in ()).throw(RuntimeError("boom")),
                         BaselineChoice.parse("best"), refused=(CublasLtUnsupported,))


# ------------------------------------------------------------------------- a fake cuBLASLt's candidates

class FakeLt:
    """The calls of `CublasLtMatmul.prepare_candidates`, recorded; the heuristic offers `offered` results, each
    (state, workspace bytes, {attribute: value})."""

    def __init__(self, lt, offered):
        self.lt, self.offered = lt, offered
        self.requested, self.matmul_calls, self.base = None, [], None
        for name in ("cuBLASLtError", "MatmulDescAttribute", "MatrixLayoutAttribute", "MatmulPreferenceAttribute",
                     "MatmulAlgoConfigAttribute", "MatmulTile", "MatmulStages", "ReductionScheme", "ClusterShape",
                     "get_matmul_desc_attribute_dtype", "get_matrix_layout_attribute_dtype",
                     "get_matmul_preference_attribute_dtype", "get_matmul_algo_config_attribute_dtype",
                     "matmul_heuristic_result_dtype"):
            setattr(self, name, getattr(lt, name))
        self.matmul_desc_create = lambda compute, scale: 11
        self.matrix_layout_create = lambda *args: 12
        self.matmul_preference_create = lambda: 13
        self.matmul_desc_set_attribute = self.matrix_layout_set_attribute = lambda *args: None
        self.matmul_preference_set_attribute = lambda *args: None
        self.matmul = lambda *args: self.matmul_calls.append(args)
        self.matmul_desc_destroy = self.matrix_layout_destroy = self.matmul_preference_destroy = None

    def matmul_algo_get_heuristic(self, handle, desc, a, b, c, d, preference, requested, results, found):
        self.requested, self.base = requested, results
        array = np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * (requested * self.itemsize)).from_address(
            results)).view(self.lt.matmul_heuristic_result_dtype)
        for index, (state, workspace, _) in enumerate(self.offered[:requested]):
            array[index]["state"], array[index]["workspace_size"] = state, workspace
            array[index]["waves_count"] = 1.5
        np.ctypeslib.ctypes.c_int32.from_address(found).value = min(requested, len(self.offered))

    @property
    def itemsize(self):
        return np.dtype(self.lt.matmul_heuristic_result_dtype).itemsize

    def matmul_algo_config_get_attribute(self, algo, attribute, buffer, size, written):
        index = (algo - self.base) // self.itemsize
        name = self.lt.MatmulAlgoConfigAttribute(attribute).name
        value = self.offered[index][2].get(name, 0)
        np.ctypeslib.as_array((np.ctypeslib.ctypes.c_uint8 * size).from_address(buffer))[:] = \
            np.array([value], dtype=self.lt.get_matmul_algo_config_attribute_dtype(attribute)).view(np.uint8)


def fake_runner(fake, workspace=1 << 20):
    device = SimpleNamespace(make_current=lambda: None)
    runner = object.__new__(cublaslt.CublasLtMatmul)     # its library calls are the fake's
    runner.__dict__.update(_lt=fake, _device=device, _stream=SimpleNamespace(address=7), closed=True, handle=1,
                           workspace=SimpleNamespace(address=4096), workspace_bytes=workspace, _owned=[],
                           _keep_alive=[])
    return runner


def bf16_plan():
    return plan_matmul(parse_types({"a": "bf16"}), gemm_operands(64, 32, 16, orders=parse_layout("TN")))


def buffers():
    return [SimpleNamespace(address=address) for address in (1 << 20, 2 << 20, 3 << 20)]


def test_candidates_are_the_heuristics_successful_results_in_its_order_each_with_its_own_algorithm():
    lt = pytest.importorskip("nvmath.bindings.cublasLt")
    tile, stages = int(lt.MatmulTile.TILE_256x128), int(lt.MatmulStages.STAGES_64x4)
    fake = FakeLt(lt, [(0, 1024, {"ID": 66, "TILE_ID": tile, "STAGES_ID": stages, "SPLITK_NUM": 1}),
                       (15, 0, {"ID": 99}),                                   # not CUBLAS_STATUS_SUCCESS: skipped
                       (0, 4096, {"ID": 31, "SPLITK_NUM": 4, "REDUCTION_SCHEME": int(lt.ReductionScheme.INPLACE),
                                  "CLUSTER_SHAPE_ID": int(lt.ClusterShape.SHAPE_2x1x1)})])
    found = fake_runner(fake).prepare_candidates(bf16_plan(), *buffers(), 8)
    assert fake.requested == 8
    first, third = (candidate.algorithm for candidate in found)
    assert (first.rank, first.algo_id, first.tile, first.stages, first.split_k) == (1, 66, "256x128", "64x4", 1)
    assert (first.workspace_bytes, first.waves, first.cluster) == (1024, 1.5, None)
    assert (third.rank, third.algo_id, third.split_k, third.reduction, third.cluster) == (3, 31, 4, "INPLACE",
                                                                                          "2x1x1")
    assert first.candidates == third.candidates == 2
    for candidate in found:
        candidate.launch()
    algos = [call[12] for call in fake.matmul_calls]
    assert algos == [fake.base, fake.base + 2 * fake.itemsize]     # each launch passes its own algorithm
    assert {call[14] for call in fake.matmul_calls} == {1 << 20}    # the whole workspace, which covers them all


def test_prepare_is_the_heuristics_first_alone():
    lt = pytest.importorskip("nvmath.bindings.cublasLt")
    fake = FakeLt(lt, [(0, 0, {"ID": 5}), (0, 0, {"ID": 6})])
    fake_runner(fake).prepare(bf16_plan(), *buffers())()
    assert fake.requested == 1 and [call[12] for call in fake.matmul_calls] == [fake.base]


def test_no_successful_candidate_or_too_much_workspace_is_no_baseline():
    lt = pytest.importorskip("nvmath.bindings.cublasLt")
    with pytest.raises(CublasLtUnsupported, match="offers no algorithm"):
        fake_runner(FakeLt(lt, [(15, 0, {})])).prepare_candidates(bf16_plan(), *buffers(), 4)
    with pytest.raises(CublasLtUnsupported, match="need 4096 bytes of workspace, more than the 1024"):
        fake_runner(FakeLt(lt, [(0, 4096, {})]), workspace=1024).prepare_candidates(bf16_plan(), *buffers(), 4)


# --------------------------------------------------------------------------------------------- the record

def test_the_algorithm_goes_through_a_results_file_and_its_schema(tmp_path):
    from driver_gemm.results import read
    from driver_gemm.results.records import BaselineRow, CaseDevice, CaseResult, RunResult
    from driver_gemm.results.settings import RunSettings
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    algorithm = AlgorithmChoice(rank=3, algo_id=66, tile="256x128", stages="64x4", split_k=1, reduction="NONE",
                                workspace_bytes=0, waves=1.2, candidates=8, choice="best",
                                preselect_ms=(0.2, None, 0.19), final_ms=(0.21, None, 0.2), other={"later": 1})
    row = CaseResult("cublaslt-bf16-TN", "cublaslt", Shape(64, 32, 16), Status.PASS, algorithm=algorithm)
    kernel = CaseResult("k", "k", Shape(64, 32, 16), Status.PASS,
                        measured_against=BaselineRow(row.kernel, "64x32x16", CaseDevice("H200"), algorithm))
    run = RunResult("s", None, settings=RunSettings(baseline_algorithm=BaselineChoice.parse("best").as_json()),
                    cases=[row, kernel])
    path = run.write_json(tmp_path / "r.json")
    again = read.read_results(path).run
    assert again.cases[0].algorithm == algorithm
    assert again.cases[1].measured_against.algorithm == algorithm
    assert again.settings.baseline_algorithm["choice"] == "best"
    assert "algorithm" not in CaseResult("k", "k", Shape(1, 1, 1), Status.PASS).as_dict()
    bad = json.loads(json.dumps(row.as_dict()))
    bad["algorithm"]["rank"] = "third"
    with pytest.raises(Exception, match="rank"):
        read.check_against_schema(bad, {"$ref": "#/$defs/case"}, "x")


def test_the_table_says_which_algorithm_each_cublaslt_row_ran():
    from rich.console import Console

    from driver_gemm.report.tables import print_run
    from driver_gemm.results.records import CaseResult, RunResult
    from driver_gemm.specfile.model import Shape
    from driver_gemm.status import Status

    algorithm = AlgorithmChoice(rank=3, algo_id=66, tile="256x128", stages="64x4", split_k=1, candidates=8,
                                choice="best")
    run = RunResult("s", None, cases=[
        CaseResult("cublaslt-bf16-TN", "cublaslt", Shape(64, 32, 16), Status.PASS, algorithm=algorithm),
        CaseResult("cublaslt-bf16-TN", "cublaslt", Shape(128, 32, 16), Status.PASS)])
    console = Console(width=200, record=True)
    print_run(run, console)
    text = console.export_text()
    assert "cublaslt-bf16-TN: best of 8: heuristic #3, algo 66, tile 256x128, stages 64x4, split-K 1" in text
    assert text.count("heuristic #") == 1          # the row that records none gets no note


@pytest.mark.gpu
def test_every_candidate_computes_the_gemm_and_names_its_algorithm(driver_gemm_device):
    """On a GPU: the heuristic offers several algorithms for a BF16 TN GEMM; each gives the reference's C and
    reads back a tile and an id."""
    from driver_gemm.gemm import dtypes, operands
    from driver_gemm.measure.verify import compare

    device = driver_gemm_device
    stream = device.stream()
    types = parse_types({"a": "bf16"})
    gemm = gemm_operands(512, 384, 256, orders=parse_layout("TN"))
    plan = plan_matmul(types, gemm)
    inputs = operands.make_typed_inputs(gemm, types, seed=5, with_c=False)
    A = device.upload(np.frombuffer(operands.input_bytes(gemm.a, inputs.a, types.a), np.uint8), stream)
    B = device.upload(np.frombuffer(operands.input_bytes(gemm.b, inputs.b, types.b), np.uint8), stream)
    start = operands.output_bytes(gemm.c, types.c, None)
    C = device.upload(np.frombuffer(start, np.uint8), stream)
    expected = operands.reference(inputs.a, inputs.b, 1.0, 0.0, None)
    with cublaslt.CublasLtMatmul(device, stream) as lt:
        found = lt.prepare_candidates(plan, A, B, C, 8)
        assert len(found) > 1
        assert [candidate.algorithm.rank for candidate in found] == sorted(c.algorithm.rank for c in found)
        for candidate in found:
            assert candidate.algorithm.algo_id is not None and candidate.algorithm.tile
            C.upload(np.frombuffer(start, np.uint8), stream)
            candidate.launch()
            raw = C.download((len(start),), np.uint8, stream).tobytes()
            output = operands.read_output(gemm.c, raw, types.c)
            verdict = compare(output.values.reshape(-1, gemm.N), expected.reshape(-1, gemm.N),
                              rel_tolerance=dtypes.error_bound(types, gemm.K))
            assert verdict.status == "PASS", (candidate.algorithm, verdict.as_dict())
