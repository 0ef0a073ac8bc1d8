"""A struct parameter made by a Python builder (``builder: FILE.py:FUNCTION``): what it is given, the bytes it
returns checked against the compiled parameter while planning, and every way it can fail said at its line. No
GPU: the kernels are built by NVRTC and the launch's arguments packed as for a launch."""

from __future__ import annotations

import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from driver_gemm.cli import EXIT_USAGE, main
from driver_gemm.errors import ConfigError, SpecError
from driver_gemm.planning.build import offline_problems
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.planning.host_builders import BuilderFailed, built_bytes, stand_in_values
from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.session.bind import launch_values
from driver_gemm.specfile import load_spec

from conftest import ROOT, SPECS

OUTSIDE = SPECS / "outside-args.yaml"


class Buffer:
    """Stands in for a device buffer: only its address is read when arguments are packed."""

    def __init__(self, address: int):
        self.address = address


ADDRESSES = {"A": 0xA000, "B": 0xB000, "C": 0xC000, "alpha": 0xA1F0, "beta": 0xBE70}


def packed(kernel_name: str):
    """The C types and bytes of `kernel_name`'s parameters at 1001x520x776, on stand-in buffers."""
    spec = load_spec(OUTSIDE).select(kernels=[kernel_name], shapes=["1001x520x776"])
    kernel = spec.kernels[0]
    plan = plan_launch(kernel, spec.shapes[0], arch_limits("sm_90"), dict(spec.scalars))
    assert plan.valid, plan.problems
    return launch_values(kernel, plan.argument_values, {k: Buffer(v) for k, v in ADDRESSES.items()}, encode=None)


def test_the_built_params_are_the_bytes_the_field_list_packs_for_the_same_kernel():
    # args-params describes Params field by field; args-params-built has kernels/outside/args_params_struct.py make
    # it with ctypes from the values it is given: the kernel receives the same 112 bytes either way.
    _, described = packed("args-params")
    built_types, built = packed("args-params-built")
    assert len(built) == 1 and built_types[0].size == 112
    assert built == described


def test_plan_builds_the_parameter_with_stand_in_addresses_and_checks_its_size_against_the_image(capsys):
    assert main(["plan", str(OUTSIDE), "-k", "args-params-built", "-s", "1001x520x776"]) == 0
    out = capsys.readouterr().out
    assert "params: 112 bytes from builder args_params_struct.py:params" in out
    assert "1 ok, 0 INVALID" in out


def project(tmp_path, builder: str, fields: str = "[A, B, C, M, N, K]", module: str = "") -> Path:
    """A spec of args_params_struct.cu whose Params is made by `builder`, in a project of its own with `module`
    as b.py beside it."""
    (tmp_path / "pyproject.toml").write_text("")
    if not (tmp_path / "kernels").exists():
        shutil.copytree(ROOT / "kernels" / "outside", tmp_path / "kernels" / "outside")
        shutil.copytree(ROOT / "kernels" / "types", tmp_path / "kernels" / "types")
    (tmp_path / "b.py").write_text(textwrap.dedent(module))
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(f"""\
        shapes: [[64, 64, 64]]
        kernels:
          - name: k
            source: kernels/outside/args_params_struct.cu
            function: args_params_struct
            types: {{a: bf16, b: bf16, c: fp32, accumulate: fp32}}
            block: [256]
            grid: [ceil(M / 64), ceil(N / 64)]
            signature:
              - name: params
                type: struct
                builder: "{builder}"
                fields: {fields}
        """))
    return path


def only_problem(path) -> ConfigError:
    invalid, failed = offline_problems(load_spec(path))
    assert not failed
    [plan] = invalid
    [problem] = plan.problems
    return problem


BUILDERS = """
    import ctypes

    def short(values):
        return bytes(100)

    def raises(values):
        return values["ldc"]

    def number(values):
        return 112

    def empty(values):
        return b""

    def exits(values):
        raise SystemExit(3)

    class Unprintable(Exception):
        def __str__(self):
            raise RuntimeError("no text")

    def unprintable(values):
        raise Unprintable()

    def strided(values):
        return memoryview(bytes(224))[::2]
"""


@pytest.mark.parametrize("function, message, hint", [
    ("short", "builder b.py:short returned 100 bytes; the kernel's parameter is 112", "return the 112 bytes"),
    ("raises", "builder b.py:raises raised KeyError: 'ldc' (b.py:8)", "it is given A, B, C, M, N, K"),
    ("number", "builder b.py:number returned int, not bytes (anything with the buffer protocol", None),
    ("empty", "builder b.py:empty returned 0 bytes; the kernel's parameter is 112", "return the 112 bytes"),
    ("exits", "builder b.py:exits raised SystemExit: 3 (b.py:17)", "it is given"),
    ("absent", "builder b.py:absent: b.py defines no function absent (it defines Unprintable, empty, exits, "
               "number, raises, short, strided, unprintable)", None),
    # an exception whose text itself raises is named by its class
    ("unprintable", "builder b.py:unprintable raised Unprintable (b.py:24)", "it is given"),
    ("strided", "builder b.py:strided returned memoryview, not contiguous in memory", "numpy.ascontiguousarray"),
])
def test_a_builder_that_fails_or_returns_the_wrong_bytes_makes_its_cases_invalid_at_its_line(tmp_path, function,
                                                                                          message, hint):
    problem = only_problem(project(tmp_path, f"b.py:{function}", module=BUILDERS))
    # said at the struct's entry in the signature (line 10), the field named in full
    assert problem.where.endswith("spec.yaml:10") and problem.field == "kernels[k].signature[0].builder"
    assert message in str(problem)
    assert (hint in problem.hint) if hint else problem.hint is None


@pytest.mark.parametrize("module, message", [
    ("def f(:\n", "did not load: SyntaxError: "),
    ("raise RuntimeError('no GPU library here')\n", "did not load: RuntimeError: no GPU library here (b.py:1)"),
    ("import a_module_that_is_not_installed\n", "did not load: ModuleNotFoundError: No module named"),
])
def test_a_builder_file_that_does_not_load_is_said_with_its_exception(tmp_path, module, message):
    problem = only_problem(project(tmp_path, "b.py:f", module=module))
    assert message in str(problem) and "builder file" in str(problem)


def test_a_builder_may_import_the_modules_beside_it_and_is_given_every_field_by_name(tmp_path):
    (tmp_path / "layouts.py").write_text("import ctypes\nSIZE = 112\n")
    module = """
        from __future__ import annotations

        import dataclasses

        import layouts
        SEEN = []


        @dataclasses.dataclass
        class Shape:            # a dataclass looks its module up by name: the file is loaded as a module is imported
            m: int

        def record(values):
            SEEN.append(Shape(values["M"]))
            return bytes(layouts.SIZE)
    """
    path = project(tmp_path, "b.py:record", "[A, B, C, M, N, K, {name: tiles, type: int64, value: [M // 64, 7]}, "
                                            "{name: bias, type: ptr, value: null}, {name: alpha, type: ptr}]", module)
    invalid, failed = offline_problems(load_spec(path))
    assert not invalid and not failed
    kernel = load_spec(path).kernels[0]
    values = stand_in_values(kernel.signature[0], {"M": 64, "N": 64, "K": 64, "tiles": [1, 7]})
    assert list(values) == ["A", "B", "C", "M", "N", "K", "tiles", "bias", "alpha"]
    assert values["tiles"] == (1, 7) and values["bias"] == 0
    # pointers and buffers get distinct stand-in addresses, aligned as device allocations are
    addresses = [values[name] for name in ("A", "B", "C", "alpha")]
    assert len(set(addresses)) == 4 and all(address and address % 256 == 0 for address in addresses)


def test_a_tensor_map_among_the_fields_reaches_the_builder_as_its_encoded_bytes(tmp_path):
    module = """
        def maps(values):
            assert values["map_a"] == bytes(range(128)), values["map_a"]
            return values["map_a"] + values["C"].to_bytes(8, "little")
    """
    path = project(tmp_path, "b.py:maps", "[{name: map_a, type: tensormap, tensor: A, box: [64, 64]}, B, C]", module)
    spec = load_spec(path)
    kernel = spec.kernels[0]
    plan = plan_launch(kernel, spec.shapes[0], arch_limits("sm_90"), dict(spec.scalars))
    types, values = launch_values(kernel, plan.argument_values, {k: Buffer(v) for k, v in ADDRESSES.items()},
                                  encode=lambda argument, position: ("tensormap", bytes(range(128))))
    assert values == [bytes(range(128)) + (0xC000).to_bytes(8, "little")] and types[0].size == 136


def test_a_builder_failing_at_the_launch_is_a_config_error_at_its_line(tmp_path):
    module = """
        def picky(values):
            if values["A"] == 0xA000:
                raise ValueError("A is not where the table expects it")
            return bytes(112)
    """
    spec = load_spec(project(tmp_path, "b.py:picky", module=module))
    kernel = spec.kernels[0]
    plan = plan_launch(kernel, spec.shapes[0], arch_limits("sm_90"), dict(spec.scalars))
    with pytest.raises(ConfigError) as caught:
        launch_values(kernel, plan.argument_values, {k: Buffer(v) for k, v in ADDRESSES.items()}, encode=None,
                      sizes=[112])
    assert "builder b.py:picky raised ValueError: A is not where the table expects it (b.py:4)" in str(caught.value)
    assert caught.value.where.endswith("spec.yaml:10")


def test_built_bytes_takes_anything_with_the_buffer_protocol(tmp_path):
    import ctypes

    import numpy as np

    from driver_gemm.specfile.model import HostBuilder

    (tmp_path / "kinds.py").write_text(textwrap.dedent("""
        import ctypes
        import numpy as np

        class Pair(ctypes.Structure):
            _fields_ = [("a", ctypes.c_int32), ("b", ctypes.c_int64)]

        def structure(values):
            return Pair(values["x"], 2)

        def array(values):
            return np.array([values["x"], 2], dtype=np.int64)

        def view(values):
            return memoryview(bytearray(16))
    """))
    expected = bytes(ctypes.c_int32(5)) + bytes(4) + bytes(ctypes.c_int64(2))
    assert built_bytes(HostBuilder(tmp_path / "kinds.py", "structure"), {"x": 5}, 16) == expected
    assert built_bytes(HostBuilder(tmp_path / "kinds.py", "array"), {"x": 5}, 16) == np.array([5, 2]).tobytes()
    assert built_bytes(HostBuilder(tmp_path / "kinds.py", "view"), {"x": 5}, None) == bytes(16)
    with pytest.raises(BuilderFailed, match="returned 16 bytes; the kernel's parameter is 24"):
        built_bytes(HostBuilder(tmp_path / "kinds.py", "view"), {}, 24)


@pytest.mark.parametrize("builder, fields, message", [
    ("b.py", "[A, B, C]", "builder is FILE.py:FUNCTION, a Python function and its file, got 'b.py'"),
    ("b.py:2x", "[A, B, C]", "builder is FILE.py:FUNCTION"),
    ("b.txt:f", "[A, B, C]", "a builder file ends in .py; got b.txt"),
    ("missing.py:f", "[A, B, C]", "builder file", ),
    ("../outside.py:f", "[A, B, C]", "leaves the spec's project"),
    ("b.py:f", "[A, B, C, {name: inner, type: struct, builder: 'b.py:g', fields: [M]}]",
     "a builder makes a whole parameter's bytes; a struct inside a struct is laid out by its fields"),
])
def test_a_malformed_builder_is_refused_at_load_at_its_field(tmp_path, builder, fields, message):
    folder = tmp_path / "project"
    folder.mkdir()
    (tmp_path / "outside.py").write_text("def f(values):\n    return b''\n")
    path = project(folder, builder, fields, "def f(values):\n    return bytes(112)\n")
    with pytest.raises(SpecError) as caught:
        load_spec(path)
    assert message in str(caught.value)
    assert "signature[0]" in caught.value.field
    assert main(["plan", str(path)]) == EXIT_USAGE


def test_a_run_s_provenance_counts_the_builder_file_among_the_kernel_s_sources(tmp_path):
    from driver_gemm.runners.environment import file_digests

    path = project(tmp_path, "b.py:f", module="def f(values):\n    return bytes(112)\n")
    sources, _, kernels = file_digests(load_spec(path), tmp_path)
    assert set(sources) == {"kernels/outside/args_params_struct.cu", "b.py"}
    before = kernels["k"]
    (tmp_path / "b.py").write_text("def f(values):\n    return bytes(112)  # changed\n")
    assert file_digests(load_spec(path), tmp_path)[2]["k"] != before


def test_a_tuning_key_changes_with_the_builder_s_file_and_function_but_not_its_folder(tmp_path):
    from driver_gemm.tune.tune_cache import tuning_key

    module = "def f(values):\n    return bytes(112)\n\ndef g(values):\n    return bytes(112)\n"

    def key(folder, builder="b.py:f", text=module):
        folder.mkdir(exist_ok=True)
        spec = load_spec(project(folder, builder, module=text))
        return tuning_key(spec, spec.kernels[0], spec.shapes[0], {}, "sm_90")

    first = key(tmp_path / "one")
    assert key(tmp_path / "two") == first                       # the same files elsewhere: the same key
    assert key(tmp_path / "one", "b.py:g") != first             # another function
    assert key(tmp_path / "one", text=module + "# edited\n") != first   # the file edited


def test_a_builder_that_never_returns_is_refused_after_the_bound_and_not_waited_for_again(tmp_path, monkeypatch):
    from driver_gemm.planning import host_builders
    monkeypatch.setattr(host_builders, "BUILDER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(host_builders, "_HUNG", set())
    module = "import time\n\ndef f(values):\n    time.sleep(3600)\n"
    problem = only_problem(project(tmp_path, "b.py:f", module=module))
    assert "builder b.py:f has not returned after 0.5 s (BUILDER_TIMEOUT_S): a loop that never ends?" in str(problem)
    assert problem.field == "kernels[k].signature[0].builder"
    # The next case's call is refused at once: a sweep waits for the bound once.
    import time
    started = time.monotonic()
    problem = only_problem(project(tmp_path, "b.py:f", module=module))
    assert "has not returned after 0.5 s (BUILDER_TIMEOUT_S): a loop that never ends? It is not called again" in \
        str(problem) and time.monotonic() - started < 0.5
    # A module whose own code never ends is bounded the same way.
    (tmp_path / "other").mkdir()
    looping = "import time\nwhile True:\n    time.sleep(1)\n"     # asleep: the thread left behind spends nothing
    problem = only_problem(project(tmp_path / "other", "b.py:f", module=looping))
    assert "has not loaded after 0.5 s" in str(problem)


def test_a_builder_returning_python_objects_or_text_is_refused_not_taken_as_bytes(tmp_path):
    """An object array's buffer holds the addresses of Python objects in this process (no kernel can read them);
    text and dates are no parameter's bytes either. A structured array of numbers stays a struct's bytes."""
    import numpy as np

    from driver_gemm.specfile.model import HostBuilder

    (tmp_path / "kinds.py").write_text(textwrap.dedent("""
        import numpy as np

        def objects(values):
            return np.array([object() for _ in range(2)], dtype=object)

        def text(values):
            return np.array(["abcdefgh"] * 2, dtype="S8")

        def unicode(values):
            return np.array(["abcd"], dtype="U4")

        def dates(values):
            return np.array(["2024-01-01", "2024-01-02"], dtype="datetime64[D]")

        def record(values):
            return np.zeros(1, dtype=[("a", "<i8"), ("b", "<f8")])
    """))
    for function in ("objects", "text", "unicode", "dates"):
        with pytest.raises(BuilderFailed, match=f"builder kinds.py:{function} returned ndarray of .* values, not "
                                                "the parameter's bytes"):
            built_bytes(HostBuilder(tmp_path / "kinds.py", function), {}, 16)
    assert built_bytes(HostBuilder(tmp_path / "kinds.py", "record"), {}, 16) == bytes(16)
    assert np.dtype(object).hasobject


def test_a_builder_s_exception_is_said_in_bounded_text_and_one_whose_text_raises_by_its_name(tmp_path):
    from driver_gemm.planning.host_builders import built_numbers
    from driver_gemm.specfile.model import HostBuilder

    (tmp_path / "raising.py").write_text(textwrap.dedent("""
        class Unprintable(Exception):
            def __str__(self):
                raise RuntimeError("no text")

        class Unreadable:
            def __array__(self, dtype=None, copy=None):
                raise Unprintable()

        def huge(values):
            raise Exception("E" * 3_000_000)

        def unreadable(values):
            return Unreadable()
    """))
    with pytest.raises(BuilderFailed) as huge:
        built_numbers(HostBuilder(tmp_path / "raising.py", "huge"), {})
    assert len(str(huge.value)) < 1000 and "more characters)" in str(huge.value)
    # NumPy's conversion raised an exception whose str() raises: named, not an internal error
    with pytest.raises(BuilderFailed, match="which NumPy cannot read as numbers: Unprintable$"):
        built_numbers(HostBuilder(tmp_path / "raising.py", "unreadable"), {})


def test_a_builder_that_prints_writes_to_stderr_and_plan_csv_stays_csv(tmp_path, capsys):
    """A builder's print, at import or when called, lands on stderr: on stdout it would be a row of the CSV."""
    module = """
        import sys
        print("IMPORT NOISE")

        def f(values):
            print("CALL NOISE")
            sys.stdout.write("MORE NOISE\\n")
            return bytes(112)
    """
    path = project(tmp_path, "b.py:f", module=module)
    assert main(["plan", str(path), "--csv"]) == 0
    out, err = capsys.readouterr()
    assert "NOISE" not in out and out.splitlines()[0].startswith("kernel,")
    assert "IMPORT NOISE" in err and "CALL NOISE" in err and "MORE NOISE" in err
    # the proxy is gone with the last builder thread (one an earlier test left hanging keeps it, by design)
    from driver_gemm.planning import host_builders
    assert host_builders._builder_threads or not isinstance(sys.stdout, host_builders._BuilderStdout)


def test_only_the_builder_s_thread_is_routed_to_stderr_while_it_runs(tmp_path, capsys):
    """The main thread's output written while a builder runs (on a thread of its own) stays on stdout."""
    import threading

    from driver_gemm.planning.host_builders import built_numbers
    from driver_gemm.specfile.model import HostBuilder

    (tmp_path / "waits.py").write_text(textwrap.dedent("""
        def f(values):
            print("from the builder")
            values["started"].set()
            values["go"].wait(30)
            print("from the builder, later")
            return [1, 2]
    """))
    started, go = threading.Event(), threading.Event()
    caller = threading.Thread(target=built_numbers, args=(HostBuilder(tmp_path / "waits.py", "f"),
                                                          {"started": started, "go": go}))
    caller.start()
    assert started.wait(30)
    print("from the main thread")
    go.set()
    caller.join(30)
    out, err = capsys.readouterr()
    assert out == "from the main thread\n"
    assert err == "from the builder\nfrom the builder, later\n"
