#!/usr/bin/env bash
# Everything that needs the GPU, in one go: the GPU tests, the seed spec, the
# comparison with the C++ reference timings, and the host-overhead and compile
# benchmarks. Full results land in $OUT (default ./gpu-results); the summary
# tables are printed last.
#
#   scripts/gpu_check.sh [tests] [seed] [anchors] [launch] [compile] [SPEC ...]
#   (no arguments: all five steps)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(tests seed anchors launch compile)
status=0
for step in "${steps[@]}"; do
    echo "=== $step ($(date -u +%FT%TZ))"
    case "$step" in
        tests)   python3 -m pytest -q -m gpu tests -p no:cacheprovider 2>&1 | tee "$OUT/gpu-tests.log" || status=1 ;;
        seed)    python3 -m driver_gemm run specs/seed.yaml --json "$OUT/seed.json" -q || status=1 ;;
        anchors) python3 -m driver_gemm run specs/anchors.yaml --json "$OUT/anchors.json" -q || status=1 ;;
        launch)  python3 scripts/bench_launch.py --json "$OUT/launch.json" || status=1 ;;
        compile) python3 scripts/bench_compile.py --json "$OUT/compile.json" || status=1 ;;
        *.yaml)  name=$(basename "$step" .yaml)
                 python3 -m driver_gemm run "$step" --json "$OUT/$name.json" -q || status=1 ;;
        *)       echo "unknown step $step"; status=2 ;;
    esac
done
exit $status
