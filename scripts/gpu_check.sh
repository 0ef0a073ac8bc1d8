#!/usr/bin/env bash
# usage: scripts/gpu_check.sh STEP ...     (on a GPU machine, after `. scripts/gpu_env.sh`)
#
# Everything that needs the GPU, in one go. Full results land in $OUT (default ./gpu-results), one
# file or folder per step; the summary lines are printed last.
#
# Steps: headlines (scripts/regenerate.py: the headline results into $OUT/<gpu-name>/ and the page
# rendered from them into $OUT/performance.md; about 6 minutes), tests (every GPU test), seed (the seed
# spec, timed end to end), fast (specs/fast.yaml at 4096^3), tma (specs/tma.yaml and specs/tma-bf16.yaml),
# v12p (specs/tma-bf16-dev.yaml: v12 and its persistent forms against cuBLASLt BF16 on small shapes,
# 4096^3 and 8192^3, at most 4 minutes), suite (specs/suite.yaml: the shape suite, BF16 and TF32 against the
# vendor rows, small and large shapes apart, each kernel's geometric means last; at most ~9 minutes), fill
# (specs/sweep-fill.yaml: the narrow tiles the suite's tables take between decode and large shapes, then the
# 128 x 128 and 128 x 256 tiles where the wide one begins to fill the GPU; < 3 minutes), band
# (specs/sweep-band.yaml: split, stream-K, wide-tile and swapped forms at M = 129 to 320, then the suite's tables
# there; about 8 minutes), off-suite (the suite's tables on two sets of 12 shapes outside the suite, bf16 out and TF32,
# then fp32 out; < 8 minutes), read-ceiling
# (scripts/read_ceiling.py: the decode and M = 128 shapes' B read whole beside torch.mm, under do_bench), fp8
# (specs/fp8.yaml: v13 in e4m3 against cuBLASLt FP8), types (specs/types.yaml on its small shapes), baselines
# (cuBLASLt against torch in interleaved rounds of equal length, SM clocks of both sides in the table:
# do_bench for large kernels, a CUDA graph of flushed samples for small ones; ~75 s, < 120 s),
# baselines-locked (the same at a locked 1500 MHz SM clock; root), baselines-kernels (1024x512x1024 and
# 4096^3 at 1500 MHz, with each side's kernels timed by CUPTI), patterns (cuBLASLt bf16, fp16 and e4m3 at
# 4096^3 and 8192^3, do-bench and flush patterns on torch's operands, against torch+do_bench, clocks side by
# side; a warm burst against torch's; then bf16 on our own operands), torch-kernels (v12p-bf16-out and v12p of
# specs/tma-bf16.yaml against torch.mm on torch's operands at 4096^3 and 8192^3, do-bench samples, interleaved
# with torch's do_bench, both clocks and % of torch in the table; < 4 minutes), torch-suite (the same for v13 of
# specs/suite.yaml, BF16 and TF32, on its small and skinny shapes; < 5 minutes), torch-suite-all (the same on every
# shape of the suite, BF16 then TF32; < 10 minutes), vendor-choice (the BF16 headlines'
# cuBLASLt rows with the heuristic's first algorithm and with the best of 8, compared), cupti (the CUPTI timer
# against events and torch.profiler), gates (the seed spec with --min-pct and --baseline-results: exits 1
# naming each failing gate), prebuilt (specs/prebuilt.yaml), profile (run
# --profile of seed and v8 cases under Nsight Compute), profile-tma (v11 and v12 at 4096^3), profile-suite (the suite's
# BF16 dispatch under Nsight Compute: v15 on two large shapes and two awkward ones), profile-v14 (the same for
# its decode entries: v14 at 1x4096x4096 and 64x8192x8192), strategies
# (tuning strategies on specs/sweep-v8.yaml), nvcc (the nvcc and NVRTC builds timed), sweeps (the v11 and
# v12 sweeps by halving), tune-v13 (specs/sweep-v13.yaml's BF16 and TF32 kernels on its shapes by halving),
# tune-v14 (v14's GPU tests, then specs/sweep-v14.yaml likewise), v15 (v15's GPU tests, then its forms beside v13 and
# the vendor rows: BF16 at 4096^3 and 8192^3, TF32 and FP8 at 4096^3), v15-small (v15's GPU tests, then its narrow-tile
# forms beside the suite's v13 on the small, awkward and M = 128 shapes, and its 192-row and -column ones at
# 4104x1032x200, BF16 and TF32), v16 (v16's GPU tests, then its stream-K forms
# beside the suite's v13 on the small, awkward and M = 128 shapes, BF16 and TF32), thirdparty (kernels in outside collections'
# styles: host headers, namespaces, overloads, column-major), outside-args (specs/outside-args.yaml: a workspace
# tile counter, a nested Params struct with alpha and beta by pointer, an accumulating epilogue, beside v12p
# and cuBLASLt; its GPU tests and a timed run, < 3 minutes), outside-maps (specs/outside-maps.yaml: tensor maps by pointer, rank 3
# and a compiled cluster, beside v12p and cuBLASLt BF16; at most 4 minutes), anchors, pictures (provenance,
# typed % of peak, the samples, roofline and compare pictures from fresh runs), launch, compile (the
# benchmarks), or any SPEC.yaml.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu-results}
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
status=0
summary=()
step_done() {   # name, exit code, seconds
    summary+=("$1: exit $2 in $3 s")
    [ "$2" -eq 0 ] || status=1
}
# Shapes outside the suite for its dispatch tables (the off-suite step): the first set found where the tables fell
# short and checked their conditions; the second was first run once the conditions were final.
off_suite_1=(-s 768x768x768 -s 1200x1200x1200 -s 1536x1536x1536 -s 640x2048x2048 -s 320x4096x4096 -s 200x8192x8192
             -s 384x11008x4096 -s 2048x11008x4096 -s 2048x4096x11008 -s 3000x2000x1000 -s 32x4096x4096 -s 8x11008x4096)
off_suite_2=(-s 1024x1024x1024 -s 2560x2560x2560 -s 4096x1024x4096 -s 448x4096x4096 -s 160x5120x5120
             -s 1024x5120x13824 -s 720x1280x1280 -s 1600x2400x800 -s 96x12288x4096 -s 24x5120x5120 -s 512x14336x4096
             -s 6144x6144x6144)
# Shapes with M of 176 to 320 and large N and K that judge the band's table entries (specs/sweep-band.yaml's own
# shapes tune them): two of off_suite_1's and four that no step had run before the entries were set.
band_judges=(-s 320x4096x4096 -s 200x8192x8192 -s 272x14336x4096 -s 240x5120x13824 -s 304x6144x6144
             -s 176x11008x4096)
# Six more, first run when v14's swapped entries were judged the second time.
band_judges_2=(-s 280x8192x4096 -s 300x14336x8192 -s 248x4096x8192 -s 240x11008x4096 -s 160x14336x4096
               -s 264x6144x4096)
# The suite's small, awkward and M = 128 shapes, where the v15-small and v16 steps time their forms beside v13.
small_shapes=(-s 1024x512x1024 -s 1001x520x776 -s 127x4104x1032 -s 4104x1032x200 -s 128x4096x4096 -s 128x8192x8192
              -s 128x14336x4096)
tune_halving() {   # time limit (s), budget, name, winners spec, then the spec and tune's other arguments
    # Successive halving within the budget: its results in $OUT/NAME.json, its log in $OUT/NAME.log, its table
    # last; the exit status is the tune's.
    local limit=$1 budget=$2 name=$3 winners=$4
    shift 4
    timeout -s INT -k 10 "$limit" python3 -m driver_gemm tune "$@" --strategy halving --budget "$budget" \
        --json "$OUT/$name.json" --out "$OUT/$winners" 2>&1 | tee "$OUT/$name.log" | tail -30
}
for step in "$@"; do
    echo "=== $step ($(date -u +%FT%TZ))"
    start=$(date +%s)
    case "$step" in
        headlines)  python3 scripts/regenerate.py --out "$OUT" --page "$OUT/performance.md" ;;
        tests)      python3 -m pytest -q -m gpu tests -p no:cacheprovider -rfEs --durations=15 2>&1 | tee "$OUT/gpu-tests.log" ;;
        seed)       /usr/bin/time -f "seed run wall %e s" python3 -m driver_gemm run specs/seed.yaml --json "$OUT/seed.json" -q 2>&1 | tail -40 ;;
        fast)       python3 -m driver_gemm run specs/fast.yaml -s 4096x4096x4096 --json "$OUT/fast-4096.json" -q ;;
        tma)        python3 -m driver_gemm run specs/tma.yaml -k v10 -k v11 --json "$OUT/tma.json" -q
                    python3 -m driver_gemm run specs/tma-bf16.yaml --json "$OUT/tma-bf16.json" -q ;;
        v12p)       # v12 and its persistent forms: small shapes and 4096^3, then 8192^3 without v12 (at most 4 min)
                    timeout -s INT -k 10 120 python3 -m driver_gemm run specs/tma-bf16-dev.yaml -s 1024x512x1024 -s 1001x520x776 \
                        -s 4104x1032x200 -s 4096x4096x4096 --json "$OUT/tma-bf16-dev.json" -q; small=$?
                    timeout -s INT -k 10 120 python3 -m driver_gemm run specs/tma-bf16-dev.yaml -s 8192x8192x8192 -k v12p \
                        -k v12p-bf16-out -k v12pp -k v12pp-bf16-out --json "$OUT/tma-bf16-dev-8192.json" -q; large=$?
                    echo "=== v12p cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/tma-bf16-dev*.jsonl
                    [ $small -eq 0 ] && [ $large -eq 0 ] ;;
        outside-maps) # maps by pointer, rank 3 and __cluster_dims__ beside v12p: the small shape and 4096^3, then 8192^3
                    timeout -s INT -k 10 120 python3 -m driver_gemm run specs/outside-maps.yaml -s 1000x512x776 \
                        -s 4096x4096x4096 --json "$OUT/outside-maps.json" -q; small=$?
                    timeout -s INT -k 10 120 python3 -m driver_gemm run specs/outside-maps.yaml -s 8192x8192x8192 \
                        --json "$OUT/outside-maps-8192.json" -q; large=$?
                    echo "=== outside-maps cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/outside-maps*.jsonl
                    [ $small -eq 0 ] && [ $large -eq 0 ] ;;
        suite)      # the shape suite (specs/suite.yaml), its like-for-like rows: BF16 (v13-bf16-out, bf16 out) then TF32 (v11,
                    # v13-tf32) against their vendor rows, the small and skinny shapes and the large ones each under a
                    # timeout of their own (at most ~9 min), then the tables again with each kernel's geometric mean of
                    # % of cuBLAS over the shapes it finished
                    large=(-s 8192x1024x8192 -s 4096x14336x4096 -s 4096x4096x14336 -s 4096x4096x4096 -s 8192x8192x8192)
                    small=()
                    for shape in $(python3 -c "import yaml; print(' '.join('x'.join(map(str, s)) for s in \
                            yaml.safe_load(open('specs/suite.yaml'))['shapes']))"); do
                        case " ${large[*]} " in *" $shape "*) ;; *) small+=(-s "$shape") ;; esac
                    done
                    status_suite=0
                    for name in bf16 tf32; do
                        if [ "$name" = bf16 ]; then kernels=(-k v13-bf16-out); else kernels=(-k v11 -k v13-tf32); fi
                        timeout -s INT -k 10 150 python3 -m driver_gemm run specs/suite.yaml "${kernels[@]}" "${small[@]}" \
                            --json "$OUT/suite-$name.json" -q || status_suite=1
                        timeout -s INT -k 10 130 python3 -m driver_gemm run specs/suite.yaml "${kernels[@]}" "${large[@]}" \
                            --json "$OUT/suite-$name-large.json" -q || status_suite=1
                    done
                    echo "=== suite cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/suite-*.jsonl
                    [ $status_suite -eq 0 ] ;;
        fill)       # specs/sweep-fill.yaml: the narrow forms on its shapes between decode and large (one round each),
                    # then the 128 x 128 and 128 x 256 forms where the wide tile begins to fill the GPU (3 rounds each)
                    timeout -s INT -k 10 150 python3 -m driver_gemm run specs/sweep-fill.yaml -k v13-bf16-out \
                        -k v15-bf16-out -k v15-bf16-out-96 -k v13-tf32 -k v15-tf32 -s 512x512x512 -s 1000x1000x1000 \
                        -s 2048x2048x2048 -s 256x4096x4096 -s 512x4096x4096 -s 384x3072x768 \
                        --json "$OUT/fill-narrow.json" -q; narrow=$?
                    timeout -s INT -k 10 100 python3 -m driver_gemm run specs/sweep-fill.yaml -k v15-bf16-out \
                        -k v15-bf16-out-wide -k v15-tf32 -k v15-tf32-wide -s 2048x2048x2048 -s 1024x4096x4096 \
                        -s 2048x3072x2048 -s 2048x4096x4096 --rounds 3 --json "$OUT/fill-wide.json" -q; wide=$?
                    [ $narrow -eq 0 ] && [ $wide -eq 0 ] ;;
        band)       # specs/sweep-band.yaml: its narrow forms (K split two and four ways, stream-K), then its wide ones
                    # (tiles 256 columns wide split or stream-K, v15's 128 x 256 and 192 x 192 alone or in pairs), its
                    # 128 x 128 tiles in pairs, v14's swapped tiles, one round each, then the suite's tables on its
                    # shapes and both sets of judges
                    timeout -s INT -k 10 220 python3 -m driver_gemm run specs/sweep-band.yaml -k v13-bf16-out \
                        -k v16-bf16-out -k v13-tf32 -k v16-tf32 --json "$OUT/band-forms.json" -q; forms=$?
                    timeout -s INT -k 10 220 python3 -m driver_gemm run specs/sweep-band.yaml -k v13-bf16-out-wide \
                        -k v16-bf16-out-wide -k v15-bf16-out-wide -k v15-bf16-out-192 -k v13-tf32-wide -k v16-tf32-wide \
                        -k v15-tf32-wide -k v15-tf32-192 --json "$OUT/band-wide.json" -q; wide=$?
                    timeout -s INT -k 10 100 python3 -m driver_gemm run specs/sweep-band.yaml -k v15-bf16-out-pairs \
                        -k v15-tf32-pairs --json "$OUT/band-pairs.json" -q; pairs=$?
                    # v14's swapped tiles: the forms whose accumulators or ring do not fit are INVALID (exit 1)
                    timeout -s INT -k 10 300 python3 -m driver_gemm run specs/sweep-band.yaml -k v14-bf16-out-swap \
                        -k v14-bf16-out-swap-deep -k v14-bf16-out-swap-tall -k v14-bf16-out-swap-fine -k v14-tf32-swap \
                        -k v14-tf32-swap-deep -k v14-tf32-swap-tall -k v14-tf32-swap-fine --json "$OUT/band-swap.json" \
                        -q; swap=$?
                    timeout -s INT -k 10 200 python3 -m driver_gemm run specs/suite.yaml -k v13-bf16-out -k v13-tf32 \
                        -s 224x4096x4096 -s 256x11008x4096 -s 288x8192x8192 -s 320x5120x5120 "${band_judges[@]}" \
                        "${band_judges_2[@]}" --json "$OUT/band-tables.json" -q; tables=$?
                    [ $forms -eq 0 ] && [ $wide -eq 0 ] && [ $pairs -eq 0 ] && [ $swap -le 1 ] && [ $tables -eq 0 ] ;;
        off-suite)  # the suite's tables on shapes outside it (off_suite_1 and _2 above): bf16 out and TF32, then
                    # fp32 out
                    status_off=0
                    for set in 1 2; do
                        if [ $set = 1 ]; then shapes=("${off_suite_1[@]}"); else shapes=("${off_suite_2[@]}"); fi
                        timeout -s INT -k 10 150 python3 -m driver_gemm run specs/suite.yaml -k v13-bf16-out \
                            -k v13-tf32 "${shapes[@]}" --json "$OUT/off-suite-$set.json" -q || status_off=1
                        timeout -s INT -k 10 100 python3 -m driver_gemm run specs/suite.yaml -k v13-bf16 \
                            "${shapes[@]}" --json "$OUT/off-suite-$set-fp32-out.json" -q || status_off=1
                    done
                    [ $status_off -eq 0 ] ;;
        read-ceiling) # the decode and M = 128 shapes' memory ceiling: B read whole, beside torch.mm, under do_bench
                    timeout -s INT -k 10 150 python3 scripts/read_ceiling.py --json "$OUT/read-ceiling.json" 2>&1 \
                        | tee "$OUT/read-ceiling.log"; [ "${PIPESTATUS[0]}" -eq 0 ] ;;
        fp8)        # v13 in e4m3 (specs/fp8.yaml) against cuBLASLt FP8: bf16 out on every shape, fp32 out on two (at most ~4 min)
                    timeout -s INT -k 10 170 python3 -m driver_gemm run specs/fp8.yaml -k v13-fp8 --json "$OUT/fp8.json" -q; bf16=$?
                    timeout -s INT -k 10 60 python3 -m driver_gemm run specs/fp8.yaml -k v13-fp8-fp32-out -s 1024x512x1024 \
                        -s 4096x4096x4096 --json "$OUT/fp8-fp32-out.json" -q; fp32=$?
                    echo "=== fp8 cases"
                    python3 -m driver_gemm show "$OUT"/fp8.jsonl "$OUT"/fp8-fp32-out.jsonl
                    [ $bf16 -eq 0 ] && [ $fp32 -eq 0 ] ;;
        tune-v13)   # v13's tile width and height, ring depth and split of K (specs/sweep-v13.yaml) on its small and skinny
                    # shapes by successive halving, BF16 (bf16 out) then TF32: the winners per shape, from which the
                    # suite's dispatch table is written (at most ~6 min)
                    tune_halving 250 190s tune-v13-bf16-out tune-v13-bf16-out-winners.yaml specs/sweep-v13.yaml \
                        -k v13-bf16-out; bf16=$?
                    tune_halving 250 120s tune-v13-tf32 tune-v13-tf32-winners.yaml specs/sweep-v13.yaml -k v13-tf32; tf32=$?
                    [ $bf16 -eq 0 ] && [ $tf32 -eq 0 ] ;;
        v15)        # v15's GPU tests, then its forms (specs/sweep-v15.yaml) beside v13 and the vendor rows: BF16 (bf16 out) at
                    # 4096^3 and 8192^3, TF32 (NT) and FP8 at 4096^3, each run under a timeout of its own (at most ~8 min)
                    timeout -s INT -k 10 150 python3 -m pytest -q -m gpu tests/test_gpu_v15.py -p no:cacheprovider -rfEs \
                        2>&1 | tee "$OUT/gpu-tests-v15.log" | tail -5; status_v15=${PIPESTATUS[0]}
                    for run in bf16-out:4096 bf16-out:8192 tf32:4096 fp8:4096; do
                        kernel=${run%%:*} size=${run##*:}
                        timeout -s INT -k 10 130 python3 -m driver_gemm run specs/sweep-v15.yaml -k "v15-$kernel" -k "v13-$kernel" \
                            -s "${size}x${size}x${size}" --json "$OUT/v15-$kernel-$size.json" -q >/dev/null || status_v15=1
                    done
                    echo "=== v15 cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/v15-*.jsonl
                    [ $status_v15 -eq 0 ] ;;
        v15-small)  # v15's GPU tests, then its narrow-tile forms (specs/sweep-v15-small.yaml: C through the copy engine, B
                    # multicast to a cluster of two) on the suite's small, awkward and M = 128 shapes and its 192-row and
                    # -column forms at 4104x1032x200, BF16 (bf16 out) then TF32, each beside the suite's own dispatch of
                    # v13 on the same shapes (at most ~10 min)
                    timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_gpu_v15.py -p no:cacheprovider -rfEs \
                        2>&1 | tee "$OUT/gpu-tests-v15.log" | tail -5; status_small=${PIPESTATUS[0]}
                    for kernel in bf16-out tf32; do
                        timeout -s INT -k 10 130 python3 -m driver_gemm run specs/sweep-v15-small.yaml -k "v15-$kernel-narrow" \
                            --json "$OUT/v15-small-$kernel.json" -q >/dev/null || status_small=1
                        timeout -s INT -k 10 60 python3 -m driver_gemm run specs/sweep-v15-small.yaml -k "v15-$kernel-192" \
                            -s 4104x1032x200 --json "$OUT/v15-small-192-$kernel.json" -q >/dev/null || status_small=1
                        timeout -s INT -k 10 60 python3 -m driver_gemm run specs/suite.yaml -k "v13-$kernel" "${small_shapes[@]}" \
                            --json "$OUT/v15-small-v13-$kernel.json" -q >/dev/null || status_small=1
                    done
                    echo "=== v15-small cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/v15-small-*.jsonl
                    [ $status_small -eq 0 ] ;;
        v16)        # v16's GPU tests, then its stream-K forms (specs/sweep-v16.yaml) on the suite's small, awkward and M = 128
                    # shapes, BF16 (bf16 out) then TF32, each beside the suite's own dispatch of v13 on the same shapes and
                    # the vendor rows, each run under a timeout of its own (at most ~9 min)
                    timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_gpu_v16.py -p no:cacheprovider -rfEs \
                        2>&1 | tee "$OUT/gpu-tests-v16.log" | tail -5; status_v16=${PIPESTATUS[0]}
                    for kernel in bf16-out tf32; do
                        # The sweep's rings over a block's shared memory are INVALID rows, so this run exits 1: the
                        # step judges its rows below instead.
                        timeout -s INT -k 10 150 python3 -m driver_gemm run specs/sweep-v16.yaml -k "v16-$kernel" \
                            --json "$OUT/v16-$kernel.json" -q >/dev/null
                        timeout -s INT -k 10 60 python3 -m driver_gemm run specs/suite.yaml -k "v13-$kernel" "${small_shapes[@]}" \
                            --json "$OUT/v16-v13-$kernel.json" -q >/dev/null || status_v16=1
                    done
                    echo "=== v16 cases (a run cut short by its timeout keeps the cases it finished)"
                    python3 -m driver_gemm show "$OUT"/v16-*.jsonl
                    python3 -m driver_gemm show "$OUT"/v16-bf16-out.jsonl "$OUT"/v16-tf32.jsonl --csv \
                        | grep -q -E ',(FAIL|ERROR|TIMEOUT),' && status_v16=1
                    [ $status_v16 -eq 0 ] ;;
        tune-v14)   # v14 (swapped operands, specs/sweep-v14.yaml) on the suite's decode shapes by successive halving,
                    # BF16 (bf16 out) then TF32, after its GPU tests (at most ~7 min)
                    timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_gpu_v14.py -p no:cacheprovider -rfEs \
                        2>&1 | tee "$OUT/gpu-tests-v14.log" | tail -5; status_v14=$?
                    for kernel in v14-bf16-out v14-tf32; do
                        tune_halving 150 120s "tune-$kernel" "tune-$kernel-winners.yaml" specs/sweep-v14.yaml -k $kernel \
                            || status_v14=1
                    done
                    [ $status_v14 -eq 0 ] ;;
        sweeps)     # the v11 and v12 sweeps by successive halving, each within a budget (at most ~3 min)
                    status_sweeps=0
                    for sweep in sweep-v12 sweep-v11; do
                        tune_halving 100 75s "$sweep-halving" "$sweep-winners.yaml" "specs/$sweep.yaml" || status_sweeps=1
                    done
                    [ $status_sweeps -eq 0 ] ;;
        types)      python3 -m driver_gemm run specs/types.yaml -s 1001x513x777 -s 1024x512x1024 --json "$OUT/types.json" -q ;;
        baselines)  timeout 180 python3 scripts/baseline_check.py --json "$OUT/baseline-check.json" 2>&1 \
                        | tee "$OUT/baseline-check.log" ;;
        baselines-locked) # the same at one locked SM clock (root), so that neither side runs cooler
                    timeout -s INT -k 10 180 python3 scripts/baseline_check.py --lock-clocks 1500 --json "$OUT/baseline-check-locked.json" \
                        2>&1 | tee "$OUT/baseline-check-locked.log" ;;
        baselines-kernels) # the small shape (and 4096^3 for scale) at 1500 MHz, with both sides' kernels and
                    # their CUPTI durations: is a difference between the timers the kernel's or the timer's?
                    timeout -s INT -k 10 120 python3 scripts/baseline_check.py --lock-clocks 1500 --kernels \
                        --shapes 1024x512x1024 4096x4096x4096 --json "$OUT/baseline-kernels.json" 2>&1 \
                        | tee "$OUT/baseline-kernels.log" ;;
        torch-kernels) # our kernels against torch.mm, timed by do_bench, on the same tensors, interleaved (at most 4 min)
                    timeout -s INT -k 10 240 python3 scripts/baseline_check.py --kernel specs/tma-bf16.yaml:v12p-bf16-out \
                        --kernel specs/tma-bf16.yaml:v12p --shapes 4096x4096x4096 8192x8192x8192 \
                        --json "$OUT/torch-kernels.json" 2>&1 | tee "$OUT/torch-kernels.log" ;;
        torch-suite) # v13 (bf16 out, and tf32 with B column-major; the suite's dispatch) against torch.mm on the suite's
                    # seed, decode and awkward shapes, timed as torch-kernels is (at most 5 min)
                    timeout -s INT -k 10 290 python3 scripts/baseline_check.py --kernel specs/suite.yaml:v13-bf16-out \
                        --kernel specs/suite.yaml:v13-tf32 --shapes 1024x512x1024 1x4096x4096 128x4096x4096 1x14336x4096 128x14336x4096 1001x520x776 \
                        --shape-timeout 25 --json "$OUT/torch-suite.json" 2>&1 | tee "$OUT/torch-suite.log" ;;
        torch-suite-all) # the same against torch.mm on every shape of the suite, BF16 then TF32, each within 300 s
                    shapes=$(python3 -c "import yaml; print(' '.join('x'.join(map(str, s)) for s in \
                        yaml.safe_load(open('specs/suite.yaml'))['shapes']))")
                    status_torch=0
                    for name in bf16 tf32; do
                        kernel=v13-bf16-out; [ "$name" = tf32 ] && kernel=v13-tf32
                        timeout -s INT -k 10 300 python3 scripts/baseline_check.py --kernel "specs/suite.yaml:$kernel" \
                            --shapes $shapes --shape-timeout 40 --json "$OUT/torch-suite-all-$name.json" 2>&1 \
                            | tee "$OUT/torch-suite-all-$name.log" | tail -30; [ "${PIPESTATUS[0]}" -eq 0 ] || status_torch=1
                    done
                    [ $status_torch -eq 0 ] ;;
        patterns)   # cuBLASLt bf16, fp16 and e4m3 at 4096^3 and 8192^3 with the do-bench and flush patterns on torch's
                    # operands, interleaved with torch+do_bench, both sides' NVML clocks in the table; bf16 as a warm
                    # burst against torch's warm burst; then bf16 with do-bench on our own operands: what the data
                    # alone does (docs/timing.md; about 6 min)
                    timeout -s INT -k 10 330 python3 scripts/baseline_check.py --shapes 4096x4096x4096 8192x8192x8192 \
                        --shape-timeout 60 --samples do-bench flush --json "$OUT/patterns.json" 2>&1 \
                        | tee "$OUT/patterns.log"; same=${PIPESTATUS[0]}
                    timeout -s INT -k 10 120 python3 scripts/baseline_check.py --only bf16 --shapes 4096x4096x4096 \
                        --shape-timeout 90 --samples burst:8:1000 --json "$OUT/patterns-burst.json" 2>&1 \
                        | tee "$OUT/patterns-burst.log"; burst=${PIPESTATUS[0]}
                    timeout -s INT -k 10 120 python3 scripts/baseline_check.py --only bf16 --operands own \
                        --shapes 4096x4096x4096 8192x8192x8192 --shape-timeout 50 --samples do-bench \
                        --json "$OUT/patterns-own.json" 2>&1 | tee "$OUT/patterns-own.log"
                    [ "$same" -eq 0 ] && [ "$burst" -eq 0 ] ;;
        cupti)      # the CUPTI timer against events at 4096^3 (within 0.5%) and against torch.profiler's kernel
                    # durations at 1024x512x1024 (within 1%); then a run timed by it (needs cupti-python)
                    timeout -s INT -k 10 120 python3 scripts/cupti_check.py --json "$OUT/cupti-check.json" 2>&1 \
                        | tee "$OUT/cupti-check.log"; check=${PIPESTATUS[0]}
                    timeout -s INT -k 10 120 python3 -m driver_gemm run specs/seed.yaml -k v4 -s 1024x512x1024 \
                        --timer cupti --json "$OUT/seed-cupti.json" -q; run=$?
                    [ $check -eq 0 ] && [ $run -eq 0 ] ;;
        vendor-choice) # the cuBLASLt rows of the BF16 and FP8 headlines with the heuristic's first algorithm, then
                    # with the fastest of its first 8 (the default), compared: best-of-N must be SAME or FASTER
                    for choice in heuristic best; do
                        timeout -s INT -k 10 100 python3 -m driver_gemm run specs/tma-bf16.yaml -k v12p-bf16-out \
                            -s 4096x4096x4096 -s 8192x8192x8192 --baseline $choice --json "$OUT/vendor-$choice.json" -q
                    done
                    python3 -m driver_gemm compare "$OUT/vendor-heuristic.json" "$OUT/vendor-best.json" ;;
        gates)      # the seed spec with performance gates: v4 must reach 30% of cuBLAS, every case 99% (most fail,
                    # each named with its figures), and no case may be SLOWER than the committed headline run
                    gpu=$(python3 -c "import sys; sys.path.insert(0, 'scripts'); import regenerate as r; print(r.folder_name(r.local_gpus()[0]))")
                    python3 -m driver_gemm run specs/seed.yaml --min-pct 99 --min-pct v4=30 \
                        --baseline-results "bench/results/$gpu/seed.json.gz" --json "$OUT/gates.json" -q 2>&1 \
                        | tee "$OUT/gates.log"; [ "${PIPESTATUS[0]}" -eq 1 ] ;;
        prebuilt)   python3 -m driver_gemm run specs/prebuilt.yaml --json "$OUT/prebuilt.json" -q ;;
        thirdparty) # kernels written the way outside collections write them, checked on the GPU (< 60 s)
                    timeout -s INT -k 10 120 python3 -m pytest -q -m gpu tests/test_third_party_style.py \
                        -p no:cacheprovider -rfEs 2>&1 | tee "$OUT/thirdparty-tests.log"; tests=${PIPESTATUS[0]}
                    timeout -s INT -k 10 120 python3 -m driver_gemm run tests/kernels/thirdparty_style/specs/thirdparty.yaml \
                        --no-timing --json "$OUT/thirdparty.json" -q 2>&1 | tail -30; run=${PIPESTATUS[0]}
                    [ $tests -eq 0 ] && [ $run -eq 1 ] ;;   # run: 1 for its three INVALID cases, by design
        outside-args) # kernels taking their arguments as outside kernels do: every case PASS, timed beside v12p
                    timeout -s INT -k 10 240 python3 -m pytest -q -m gpu tests/test_gpu_outside_args.py \
                        -p no:cacheprovider -rfEs 2>&1 | tee "$OUT/outside-args-tests.log"; tests=${PIPESTATUS[0]}
                    timeout -s INT -k 10 240 python3 -m driver_gemm run specs/outside-args.yaml \
                        --json "$OUT/outside-args.json" -q 2>&1 | tail -30; run=${PIPESTATUS[0]}
                    [ $tests -eq 0 ] && [ $run -eq 0 ] ;;
        profile)    python3 -m driver_gemm run specs/seed.yaml -s 1024x512x1024 --profile --json "$OUT/profile-seed.json" -q
                    python3 -m driver_gemm run specs/fast.yaml -k v8 -s 4096x4096x4096 --profile --json "$OUT/profile-v8.json" -q ;;
        profile-suite) # the suite's BF16 (bf16 out) dispatch under Nsight Compute: v15 at 4096^3 and 8192^3 and on two
                    # awkward shapes (at most ~4 min)
                    timeout -s INT -k 10 200 python3 -m driver_gemm run specs/suite.yaml -k v13-bf16-out -s 4096x4096x4096 \
                        -s 8192x8192x8192 -s 4104x1032x200 -s 1001x520x776 --profile --json "$OUT/profile-suite-bf16.json" -q ;;
        profile-v14) # the suite's BF16 (bf16 out) decode entries under Nsight Compute: v14 at 1x4096x4096 and
                    # 64x8192x8192 (about 1 min)
                    timeout -s INT -k 10 150 python3 -m driver_gemm run specs/suite.yaml -k v13-bf16-out -s 1x4096x4096 \
                        -s 64x8192x8192 --profile --json "$OUT/profile-v14.json" -q ;;
        profile-tma) python3 -m driver_gemm run specs/tma.yaml -k v11 -s 4096x4096x4096 --profile --json "$OUT/profile-v11.json" -q
                    python3 -m driver_gemm run specs/tma-bf16.yaml -k v12 -s 4096x4096x4096 --profile --json "$OUT/profile-v12.json" -q ;;
        strategies) timeout 400 python3 scripts/tune_strategies.py specs/sweep-v8.yaml --shapes 4096x4096x4096 8192x8192x8192 \
                        --max-seconds 330 --json "$OUT/tune-strategies.json" 2>&1 | tee "$OUT/tune-strategies.log" ;;
        nvcc)       timeout 150 python3 scripts/nvcc_vs_nvrtc.py --run --json "$OUT/nvcc-vs-nvrtc.json" 2>&1 \
                        | tee "$OUT/nvcc-vs-nvrtc.log" ;;
        anchors)    python3 -m driver_gemm run specs/anchors.yaml --json "$OUT/anchors.json" -q ;;
        pictures)   # provenance, typed % of peak and every picture from fresh runs (< 60 s): the run's provenance is
                    # printed, compare against the committed seed run says what differs, each picture is written
                    python3 -m driver_gemm run specs/seed.yaml -s 1024x512x1024 --json "$OUT/pictures-seed.json" -q
                    python3 -m driver_gemm run specs/types.yaml -s 1024x512x1024 --json "$OUT/pictures-types.json" -q
                    python3 -m driver_gemm show "$OUT/pictures-types.json" --plot "$OUT/pictures-samples.png"
                    python3 -m driver_gemm plot "$OUT/pictures-types.json" "$OUT/pictures-seed.json" -o "$OUT/pictures-roofline.png"
                    python3 -m driver_gemm compare tests/data/results/seed-h200.json "$OUT/pictures-seed.json" --json \
                        --plot "$OUT/pictures-compare.png" > "$OUT/pictures-compare.json"
                    python3 -c "import json, sys; p = json.load(open(sys.argv[1]))['provenance']; print(json.dumps(p, indent=1)); \
                        c = json.load(open(sys.argv[2])); print('compare warnings:', c['warnings'], c['counts'])" \
                        "$OUT/pictures-seed.json" "$OUT/pictures-compare.json"
                    ls "$OUT"/pictures-samples.png "$OUT"/pictures-roofline.png "$OUT"/pictures-compare.png ;;
        launch)     python3 scripts/bench_launch.py --json "$OUT/launch.json" ;;
        compile)    python3 scripts/bench_compile.py --json "$OUT/compile.json" ;;
        *.yaml)     name=$(basename "$step" .yaml)
                    python3 -m driver_gemm run "$step" --json "$OUT/$name.json" -q ;;
        *)          echo "unknown step $step"; false ;;
    esac
    step_done "$step" $? $(( $(date +%s) - start ))
done
echo "=== summary"
printf '%s\n' "${summary[@]}"
exit $status
