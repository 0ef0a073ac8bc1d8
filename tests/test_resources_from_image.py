"""Resources read from a CUBIN where ptxas's report is missing: the image holds no spill figures, so they are 0
only for a kernel with no stack frame to spill to, and unknown otherwise, never a 0 the image cannot vouch for."""

from __future__ import annotations

from driver_gemm.cuda.compile import compile_source

# A local array too large for registers, written at an index known only at run time, lives in the stack frame.
FRAMED = """
extern "C" __global__ void framed(float *out, const int *pick) {
    float local[512], sum = 0.0f;
    for (int i = 0; i < 512; ++i) local[i] = out[i];
    local[pick[threadIdx.x] & 511] = 1.0f;
    for (int i = 0; i < 512; ++i) sum += local[i] * i;
    out[threadIdx.x] = sum;
}
extern "C" __global__ void frameless(float *out) { out[threadIdx.x] *= 2.0f; }
"""


def test_resources_read_from_the_image_leave_spills_unknown_where_the_kernel_has_a_stack_frame(tmp_path,
                                                                                                monkeypatch):
    from driver_gemm.cuda import compile as compiling

    path = tmp_path / "framed.cu"
    path.write_text(FRAMED)
    reported = compile_source(path, ["framed", "frameless"], "sm_90", use_cache=False)
    assert reported.resources_of("framed").stack_bytes > 0 and reported.resources_of("framed").spills_known
    monkeypatch.setattr(compiling, "_program_log", lambda program: "")
    monkeypatch.setattr(compiling, "_compile_bounded", compiling.compile_program)   # NVRTC here, where it is patched
    built = compile_source(path, ["framed", "frameless"], "sm_90", use_cache=False)
    framed, frameless = built.resources_of("framed"), built.resources_of("frameless")
    assert framed.stack_bytes == reported.resources_of("framed").stack_bytes
    assert framed.spill_store_bytes is None and framed.spill_load_bytes is None and not framed.spills_known
    assert frameless.spill_store_bytes == 0 and frameless.spill_load_bytes == 0 and frameless.spills_known
    assert "else unknown" in built.log
