"""The launches of a kernel's ``then:``: checked against their own functions in the image as the kernel's own
launch is, their names and buffers read as the kernel's, and their mistakes said at ``then[i]``. No GPU: NVRTC
compiles, and a hand-written PTX image stands in for a prebuilt one."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from driver_gemm.cuda.occupancy import arch_limits
from driver_gemm.errors import SpecError
from driver_gemm.planning.build import compile_spec, led_by_spec_line, offline_problems
from driver_gemm.planning.case_plan import plan_launch
from driver_gemm.specfile import load_spec
from driver_gemm.specfile.model import Shape

SHAPE = Shape(130, 72, 40)

# A GEMM of two launches: partial products into P, then a function that writes C from P, one function for each
# property of its own that its launch must answer to.
SOURCE = """\
#include <cooperative_groups.h>
constexpr int TILE = 16;
__global__ void __launch_bounds__(TILE * TILE)
partials(const float* A, const float* B, float* P, int M, int N, int K)
{
    const int row = blockIdx.y * TILE + threadIdx.y, column = blockIdx.x * TILE + threadIdx.x;
    if (row >= M || column >= N) return;
    float sum = 0.0f;
    for (int k = 0; k < K; ++k) sum += A[row * K + k] * B[k * N + column];
    P[row * N + column] = sum;
}
#define AT long long at = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (at >= (long long)M * N) return;
__global__ void fin_plain(const float* P, float* C, int M, int N) { AT C[at] = P[at]; }
__global__ void __launch_bounds__(64) fin_bounded(const float* P, float* C, int M, int N) { AT C[at] = P[at]; }
__global__ void fin_extern(const float* P, float* C, int M, int N)
{
    extern __shared__ float stage[];
    stage[threadIdx.x] = P[blockIdx.x];
    __syncthreads();
    AT C[at] = stage[threadIdx.x] + P[at];
}
__global__ void fin_sync(const float* P, float* C, int M, int N)
{
    cooperative_groups::this_grid().sync();
    AT C[at] = P[at];
}
__global__ void __cluster_dims__(2, 1, 1) fin_cluster(const float* P, float* C, int M, int N) { AT C[at] = P[at]; }
__global__ void fin_static(const float* P, float* C, int M, int N)
{
    __shared__ float big[10240];   // 40 KB static
    extern __shared__ float dyn[];
    big[threadIdx.x] = P[blockIdx.x];
    dyn[threadIdx.x] = big[threadIdx.x];
    __syncthreads();
    AT C[at] = dyn[threadIdx.x] + big[(threadIdx.x * 37) % 10240];
}
__global__ void fin_bias(const float* P, const float* bias, float* C, int M, int N) { AT C[at] = P[at] + bias[at % N]; }
__global__ void fin_scaled(const float* P, float* C, int M, int N, const float* alpha, const float* beta)
{
    AT C[at] = *alpha * P[at] + *beta * C[at];
}
"""

KERNEL = """\
  - name: {name}
    source: k.cu
    function: partials
    types: {{a: fp32}}
    {epilogue}block: [16, 16]
    grid: [ceil(N / 16), ceil(M / 16)]
    tile: [16, 16]
    signature: [A, B, {{name: P, type: buffer, element: float32, size: M * N}}, M, N, K{own}]
    then:
      - function: {function}
        block: [{block}]
        grid: [{grid}]
        {shared}signature: {signature}
"""


def kernel_entry(name: str, function: str = "fin_plain", *, block: str = "256", grid: str = "'ceil(M * N / 256)'",
                 shared: str = "", signature: str = "[P, C, M, N]", own: str = "",
                 epilogue: str = "overwrite") -> str:
    return KERNEL.format(name=name, function=function, block=block, grid=grid, signature=signature, own=own,
                         shared=f"shared_bytes: {shared}\n        " if shared else "",
                         epilogue=f"epilogue: {epilogue}\n    " if epilogue else "")


def write(folder: Path, *entries: str, scalars: str = "", name: str = "spec.yaml") -> Path:
    (folder / "pyproject.toml").write_text("")
    (folder / "k.cu").write_text(SOURCE)
    path = folder / name
    path.write_text(f"shapes: [[130, 72, 40]]\n{scalars}kernels:\n" + "".join(entries))
    return path


def refusal(folder: Path, *entries: str, scalars: str = "") -> SpecError:
    with pytest.raises(SpecError) as info:
        load_spec(write(folder, *entries, scalars=scalars))
    return info.value


# ----------------------------------------------------------------------- checks against the compiled image


def test_a_following_launch_gets_the_checks_against_its_function_that_the_kernels_own_launch_gets(tmp_path):
    spec = load_spec(write(
        tmp_path,
        kernel_entry("plain"),
        kernel_entry("bounded", "fin_bounded"),
        kernel_entry("extern", "fin_extern"),
        kernel_entry("sync", "fin_sync"),
        kernel_entry("cluster", "fin_cluster", grid="37"),
        kernel_entry("static", "fin_static", shared="200 * 1024")))
    invalid, failed = offline_problems(spec)
    assert failed == {}
    found = {plan.kernel.name: [(problem.field, str(problem)) for problem in plan.problems] for plan in invalid}
    expected = {
        "bounded": ("then[0].block", "fin_bounded: a block of 256 threads (256 x 1 x 1) is over the kernel's "
                                     "__launch_bounds__ of 64 threads"),
        "extern": ("then[0].shared_bytes", "fin_extern: the kernel uses dynamic shared memory (an extern "
                                           "__shared__ array), but shared_bytes gives it none"),
        "sync": ("then[0].function", "fin_sync: the kernel waits for its whole grid"),
        "cluster": ("then[0].grid", "fin_cluster: grid 37x1x1 is not a whole number of the kernel's "
                                    "__cluster_dims__ clusters (2x1x1)"),
        "static": ("then[0].shared_bytes", "fin_static: 40960 static + 204800 dynamic = 245760 bytes of shared "
                                           "memory exceed the 232448"),
    }
    # The launch that answers to its function passes: no check reads the kernel's own function in its place.
    assert sorted(found) == sorted(expected), found
    for name, (field, message) in expected.items():
        ((got_field, text),) = found[name]
        assert got_field == f"kernels[{name}].{field}" and message in text, (name, got_field, text)
    # A launch of then: is never cooperative: its hint says so, not to make the kernel cooperative.
    sync = next(plan for plan in invalid if plan.kernel.name == "sync").problems[0]
    assert "a launch of then: is never cooperative" in sync.hint and "spec.yaml:" in str(sync)


def test_a_following_launch_of_a_prebuilt_ptx_image_has_its_signature_checked(tmp_path):
    # A hand-written PTX: the kernel's own function and the one after it, whose four parameters the spec names three.
    binary = tmp_path / "k.ptx"
    binary.write_text(
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry partials(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3, .param .u32 p4, "
        ".param .u32 p5)\n{\n\tret;\n}\n"
        ".visible .entry fin(.param .u64 p0, .param .u64 p1, .param .u32 p2, .param .u32 p3)\n{\n\tret;\n}\n")
    entry = kernel_entry("ptx", "fin", signature="[P, C, M]").replace("source: k.cu", "binary: k.ptx")
    (invalid,), failed = offline_problems(load_spec(write(tmp_path, entry)))
    assert failed == {}
    assert [problem.field for problem in invalid.problems] == ["kernels[ptx].then[0].signature"]
    assert "takes 4 parameters" in str(invalid.problems[0]) and "names 3" in str(invalid.problems[0])
    right = kernel_entry("ptx", "fin").replace("source: k.cu", "binary: k.ptx")
    assert offline_problems(load_spec(write(tmp_path, right))) == ([], {})


def test_a_prebuilt_ptx_images_launch_bounds_hold_for_the_kernel_and_its_following_launch(tmp_path):
    # .maxntid in a PTX entry is __launch_bounds__, as a CUBIN's attribute is: 256 threads of the kernel's own
    # launch over a bound of 128, and 256 of the launch after it over 64, are each refused at their block.
    binary = tmp_path / "k.ptx"
    binary.write_text(
        ".version 8.0\n.target sm_90\n.address_size 64\n"
        ".visible .entry partials(.param .u64 p0, .param .u64 p1, .param .u64 p2, .param .u32 p3, .param .u32 p4, "
        ".param .u32 p5)\n.maxntid 128, 1, 1\n{\n\tret;\n}\n"
        ".visible .entry fin(.param .u64 p0, .param .u64 p1, .param .u32 p2, .param .u32 p3)\n.maxntid 64, 1, 1\n"
        "{\n\tret;\n}\n")
    entry = kernel_entry("ptx", "fin").replace("source: k.cu", "binary: k.ptx")
    (invalid,), failed = offline_problems(load_spec(write(tmp_path, entry)))
    assert failed == {}
    assert [problem.field for problem in invalid.problems] == ["kernels[ptx].block", "kernels[ptx].then[0].block"]
    assert "__launch_bounds__ of 128 threads" in str(invalid.problems[0])
    right = entry.replace("block: [16, 16]", "block: [16, 8]").replace("block: [256]", "block: [64]")
    assert offline_problems(load_spec(write(tmp_path, right))) == ([], {})


# ----------------------------------------------------------------------- names and buffers as the kernel's


def test_a_following_grid_that_reads_max_active_clusters_plans_with_the_kernels_count(tmp_path):
    spec = load_spec(write(tmp_path, kernel_entry("k", grid="'min(max_active_clusters, ceil(M * N / 256))'")))
    plan = plan_launch(spec.kernels[0], SHAPE, arch_limits("sm_90"))
    assert plan.valid, plan.problems
    assert plan.active_clusters is not None and plan.following[0].grid == (min(plan.active_clusters.count, 37), 1, 1)


def test_a_buffer_passed_to_no_parameter_of_the_kernel_reaches_the_launch_of_then_that_names_it(tmp_path):
    bias = ", {name: bias, type: buffer, element: fp32, size: N, bias: N, pass: none}"
    spec = load_spec(write(tmp_path, kernel_entry("k", "fin_bias", signature="[P, bias, C, M, N]", own=bias)))
    (kernel,) = spec.kernels
    assert [argument.name for _, argument in kernel.memory] == ["bias"]
    assert offline_problems(spec) == ([], {})
    # Named by no launch and read by no map, it reaches nothing: still refused, the launches of then: said.
    error = refusal(tmp_path, kernel_entry("k", own=bias))
    assert error.field == "kernels[k].signature[6].pass"
    assert "no tensor map reads it and no launch of then: takes it" in str(error)


def test_alpha_and_beta_by_pointer_are_taken_by_a_launch_of_then_as_by_the_kernels_own_signature(tmp_path):
    scalars = "scalars: {alpha: 1.5, beta: -0.5}\n"
    by_pointer = "[P, C, M, N, {name: alpha, type: ptr}, {name: beta, type: ptr}]"
    spec = load_spec(write(tmp_path, kernel_entry("k", "fin_scaled", signature=by_pointer, epilogue=""),
                           scalars=scalars))
    (kernel,) = spec.kernels
    assert [path for path, _ in kernel.device_buffers()] == ["signature[2]", "then[0].signature[4]",
                                                             "then[0].signature[5]"]
    plan = plan_launch(kernel, SHAPE, arch_limits("sm_90"), dict(spec.scalars))
    assert plan.valid, plan.problems
    assert (plan.buffers["alpha"].values, plan.buffers["beta"].values) == ((1.5,), (-0.5,))
    assert offline_problems(spec) == ([], {})
    # A pointer to the case's alpha is one buffer a case: a second launch, or the kernel, shares it by its name.
    twice = kernel_entry("k", "fin_scaled", signature="[P, C, M, N, {name: alpha, type: ptr}, beta]", epilogue="",
                         own=", {name: alpha, type: ptr}")
    error = refusal(tmp_path, twice, scalars=scalars)
    assert error.field == "kernels[k].then[0].signature[4]" and "takes it by its name" in str(error)
    shared = twice.replace("[P, C, M, N, {name: alpha, type: ptr}, beta]", "[P, C, M, N, alpha, beta]")
    (kernel,) = load_spec(write(tmp_path, shared, scalars=scalars)).kernels
    plan = plan_launch(kernel, SHAPE, arch_limits("sm_90"), {"alpha": 1.5, "beta": -0.5})
    # Named, the buffer is passed; the value it holds stays the case's alpha.
    assert plan.argument_values["alpha"] == 1.5 and plan.buffers["alpha"].values == (1.5,)
    # Written with a value, it is refused, and the hint does not point back to that form.
    error = refusal(tmp_path, kernel_entry("k", "fin_scaled", epilogue="",
                                           signature="[P, C, M, N, {name: alpha, type: ptr, value: alpha}, beta]"),
                    scalars=scalars)
    assert error.field == "kernels[k].then[0].signature[4].value" and "takes no value" in str(error)
    # A matrix written out as a pointer is the matrix, as in the kernel's own signature.
    spec = load_spec(write(tmp_path, kernel_entry("k", signature="[P, {name: C, type: ptr}, M, N]")))
    assert offline_problems(spec) == ([], {})


def test_an_epilogue_is_refused_where_a_launch_of_then_takes_alpha_and_beta(tmp_path):
    # Without it the case's alpha and beta would reach C, and the declared C += A @ B be dropped without a word.
    error = refusal(tmp_path, kernel_entry("k", "fin_plain", epilogue="accumulate", signature="[P, C, M, N, alpha, "
                                           "beta]"), scalars="scalars: {alpha: 1.5, beta: -0.5}\n")
    assert error.field == "kernels[k].then[0].signature"
    assert "epilogue: accumulate is for a kernel without alpha and beta; this launch of then: takes alpha, beta" \
        in str(error)


# ----------------------------------------------------------------------- mistakes said where they are


@pytest.mark.parametrize("signature, message, field", [
    ("{}", "signature is a non-empty list of the function's arguments, got an empty mapping", "then[0].signature"),
    ("[P, {name: Cs, type: pointers, to: C}, M, N]", "a launch of then: takes standard names, typed scalars, "
     "pointers and the kernel's own buffers by name, not a pointers", "then[0].signature[1].type"),
    # Well formed, but C reaches no launch: said whole, at the kernel's signature, where it may be taken too.
    ("[P, M, N]", "signature must take C exactly once (as a pointer, through tensor maps with tensor: C, or through "
     "an array of pointers to its matrices), or a launch of then: must take it (by name, or as a ptr with value: C)",
     "signature"),
])
def test_a_following_signature_that_misses_c_is_refused_at_its_own_field(tmp_path, signature, message, field):
    error = refusal(tmp_path, kernel_entry("k", signature=signature))
    assert error.field == f"kernels[k].{field}" and message in str(error), (error.field, str(error))


@pytest.mark.parametrize("function", ["fin_plan", "fin_plain<SPLITS>"])
def test_a_following_function_that_does_not_build_is_said_at_its_field(tmp_path, function):
    spec = load_spec(write(tmp_path, kernel_entry("k", function)))
    (error,) = compile_spec(spec, "sm_90").values()
    lead = str(led_by_spec_line(error, list(spec.kernels))).splitlines()[0]
    line = next(number for number, text in enumerate((tmp_path / "spec.yaml").read_text().splitlines(), 1)
                if "function: fin_pla" in text)
    assert lead == f"{tmp_path / 'spec.yaml'}:{line}: kernels[k].then[0].function: {function} did not build:", lead
    # The kernel's own function not building is still said at its source.
    spec = load_spec(write(tmp_path, kernel_entry("k").replace("function: partials", "function: partial")))
    (error,) = compile_spec(spec, "sm_90").values()
    assert re.search(r"spec\.yaml:\d+: kernels\[k\]\.source did not build:", str(led_by_spec_line(error, list(
        spec.kernels))).splitlines()[0])

