from driver_gemm.session.sanitize import parse_report

MEMCHECK = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at sgemm_oob_read+0x1f0 in /work/tests/kernels/v1_oob_read.cu:12
=========     by thread (31,31,0) in block (1,1,0)
=========     Access at 0x7f3a2c010000 is out of bounds
=========     and is 1 bytes after the nearest allocation at 0x7f3a2c000000 of size 65536 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: cuLaunchKernel [0x2f2a1] in libcuda.so.1
=========
========= Program hit CUDA_ERROR_LAUNCH_FAILED (error 719) due to "unspecified launch failure" on CUDA API call to cuStreamSynchronize.
=========     Saved host backtrace up to driver entry point at error
=========
========= ERROR SUMMARY: 2 errors
"""

RACECHECK = """========= COMPUTE-SANITIZER
========= Error: Race reported between Write access at sgemm_tiles_missing_sync<16>(const float *, const float *, float *, int, int, int)+0x2a0 in /t/v2_missing_sync.cu:14
=========     and Read access at sgemm_tiles_missing_sync<16>(const float *, const float *, float *, int, int, int)+0x3c0 in /t/v2_missing_sync.cu:18 [1024 hazards]
=========
========= RACECHECK SUMMARY: 1 hazard displayed (1 error, 0 warnings)
"""


def test_memcheck_report():
    first, second = parse_report(MEMCHECK)
    assert first.kind == "Invalid __global__ read of size 4 bytes"
    assert first.kernel == "sgemm_oob_read" and first.location == "/work/tests/kernels/v1_oob_read.cu:12"
    assert first.block == (1, 1, 0) and first.thread == (31, 31, 0)
    assert first.address == "0x7f3a2c010000"
    assert first.line() == ("Invalid __global__ read of size 4 bytes, in sgemm_oob_read "
                            "(/work/tests/kernels/v1_oob_read.cu:12), block (1, 1, 0) thread (31, 31, 0), "
                            "address 0x7f3a2c010000")
    assert second.kind.startswith("Program hit CUDA_ERROR_LAUNCH_FAILED")


def test_racecheck_report():
    finding, = parse_report(RACECHECK)
    assert finding.kind.startswith("Race reported between Write access")
    assert finding.kernel.startswith("sgemm_tiles_missing_sync<16>")
    assert finding.location == "/t/v2_missing_sync.cu:14"
    assert finding.detail.startswith("and Read access")


RACECHECK_WARP = """========= COMPUTE-SANITIZER
========= Warning: (Warp Level Programming) Potential WAR hazard detected at __shared__ 0x500 in block (0,0,0) :
=========     Write Thread (0,2,0) at sgemm_tiles_missing_sync<16>(const float *, const float *, float *, int, int, int)+0x2a0 in /t/v2_missing_sync.cu:14
=========     Read Thread (15,1,0) at sgemm_tiles_missing_sync<16>(const float *, const float *, float *, int, int, int)+0x3c0 in /t/v2_missing_sync.cu:18
=========     Current Value : 0
"""


def test_racecheck_warp_level_hazard():
    finding, = parse_report(RACECHECK_WARP)
    assert finding.kind == ("Warning: (Warp Level Programming) Potential WAR hazard detected at __shared__ 0x500 "
                            "in block (0,0,0)")
    assert finding.kernel.startswith("sgemm_tiles_missing_sync<16>") and finding.location == "/t/v2_missing_sync.cu:14"
    assert finding.block == (0, 0, 0) and finding.thread == (0, 2, 0)


def test_clean_report_has_no_findings():
    assert parse_report("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n") == []


def _spec(tmp_path):
    from driver_gemm.specfile import load_spec
    from test_spec import MINIMAL, write

    return load_spec(write(tmp_path, MINIMAL))


def test_sanitize_spec_needs_the_tool_before_anything_runs(tmp_path, monkeypatch):
    import pytest

    from driver_gemm.errors import ToolMissingError
    from driver_gemm.session import sanitize

    monkeypatch.setattr(sanitize.shutil, "which", lambda name: None)
    with pytest.raises(ToolMissingError, match="--sanitize needs compute-sanitizer, which is not on the PATH"):
        sanitize.sanitize_spec(_spec(tmp_path), "memcheck")


def test_sanitize_spec_refuses_unknown_tools_and_specs_without_a_file(tmp_path):
    import dataclasses

    import pytest

    from driver_gemm.errors import UsageError
    from driver_gemm.session.sanitize import sanitize_spec

    with pytest.raises(UsageError, match="unknown sanitizer tool 'leakcheck'"):
        sanitize_spec(_spec(tmp_path), "leakcheck")
    with pytest.raises(UsageError, match="give one"):
        sanitize_spec(dataclasses.replace(_spec(tmp_path), path=None), "memcheck")


def test_sanitize_spec_records_findings_as_failures(tmp_path, monkeypatch):
    """The orchestration without a GPU: each case's child replaced by a canned result."""
    from driver_gemm.session import sanitize
    from driver_gemm.status import Status

    monkeypatch.setattr(sanitize, "_require_sanitizer", lambda: "compute-sanitizer")
    monkeypatch.setattr(sanitize, "_require_gpu", lambda device: None)
    findings = parse_report(MEMCHECK)
    seen = []

    def fake_case(spec_path, kernel, shape, tool, device, timeout_s):
        return {"status": "ERROR", "message": ["the child wrote no result"],
                "sanitizer": {"tool": tool, "findings": [vars(f) for f in findings],
                              "summary": [f.line() for f in findings], "exit_code": 1}}

    monkeypatch.setattr(sanitize, "sanitize_case", fake_case)
    result = sanitize.sanitize_spec(_spec(tmp_path), "memcheck", on_case=lambda case, n: seen.append(n))
    case, = result.cases
    assert result.spec.endswith("under memcheck") and result.settings.to_json() == {"sanitize": "memcheck"}
    assert case.status == Status.FAIL and case.message.startswith("memcheck: 2 finding(s): Invalid __global__ read")
    assert case.sanitizer.exit_code == 1 and seen == [2] and not result.ok
