#!/usr/bin/env bash
# Issue 61 on an H100: the wave's confirmation at one commit, in device calls of at most ten
# minutes. The project's wheel (and the host's missing ones) installed into the host's own
# virtual environment, not --target (the README's "pip install ." from any folder); the main
# job run from an empty folder by its console script, as a user runs it.
# Usage: bash experiments/wave61.sh STEP...   steps:
#   main     the main job twice on empty caches (cold, then warm), its wall each time
#   compare  the tensor-core rows of the main job at 4096, interleaved (its 2% yardstick)
#   main-w100  the main job warm with --warmup-ms 100 (issue 61's cold 60 s: 15 timings ended
#            at the 300 ms cap at 331f253, notes/timing.md), its wall and its trace; compare
#            its rows with experiments/agreement.py against the compare's
#   ladders  the sum and softmax ladders and the example (their figures against 7328d84's:
#            experiments/ladder_agreement.py); about 300 s, a device call of its own (at
#            67f770d a 200 s cut left the sums unrun)
#   kinds    run, compare, check, tune --gpus, profile on a GEMM and a buffers kernel; the
#            ceiling; attention's plan and build (the commands its kind takes)
#   gpu-rest the GPU tests outside tests/test_gpu.py;  gpu-main  tests/test_gpu.py
#   cpu      the tests without the gpu marker
#   rest+cpu gpu-rest with the CPU tests beside it (on 4 workers)
#   fp8probe the wgmma FP8 probe with mixed signs (which way a negative term is truncated)
#   fp8      the FP8 rungs', cuBLASLt's and attention's GPU tests (the FP8 sums' verdict)
#   attn     the attention kind's GPU tests alone (attention_03_wgmma's battery among them,
#            each baseline against the reference)
#   attn-compare  issue 63: the attention rungs timed beside the baselines that run here
#            (cuDNN's own SDPA too where .whl holds its frontend: scripts/wheels.sh --attention)
#            (experiments/attention_compare.py; reports in rep.tgz, attn/: at most 8 files
#            come back from a device call)
#   attn-4k  issue 63: attention_03:d128p and its persistent d128pp at S = 4096 and 16K,
#            causal and not, beside every baseline
#   attn-profile  issue 63: attention_03 (d128p, S = 4096, causal and not) under ncu beside
#            PyTorch's cuDNN backend, with the napkin (experiments/attention_profile.py)
#   sampled  the main job warm once more, its worker's main thread sampled every 2 ms and
#            its timings traced (where the wall goes)
# Logs (first lines: date, GPU, driver, command, commit) under $OUT; reports in $OUT/rep.tgz.
# Steps run one after another: the GPU parts at once time-slice the GPU between their workers,
# which the timer's books read as work off the clock (notes/timing.md, "Nothing off the clock").
set -uo pipefail
OUT=${OUT:-/tmp/out}
REP=/tmp/rep
ROOT=$PWD
mkdir -p "$OUT" "$REP" /tmp/empty
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-cache-dir .whl/*.whl \
  > "$OUT/install.log" 2>&1 || { cat "$OUT/install.log"; exit 1; }
(cd /tmp/empty && python3 -c 'import harness, sys; print(harness.__file__, sys.prefix)' \
  && command -v harness) >> "$OUT/install.log" 2>&1
header() {
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  echo "command: $*"
  echo "commit ${HARNESS_GIT_COMMIT:-unknown}"
}
source experiments/tc_rows.sh  # TC_ROWS
PYTEST="python3 -m pytest -q -p no:cacheprovider -rfE --tb=short --durations=25"
quiet() { grep -v "PytestBenchmarkWarning\|warner("; }
# the GPU tests outside tests/test_gpu.py, into pytest-gpu-rest.log; $1: said after the command
gpu_rest() {
  { header "$PYTEST -n 8 -m gpu tests --ignore=tests/test_gpu.py$1"
    timeout 560 $PYTEST -n 8 -m gpu tests --ignore=tests/test_gpu.py 2>&1 | quiet
    echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-gpu-rest.log" 2>&1
}
# the main job once from an empty folder by its console script, into $OUT/$1 with its wall;
# $2: what the header says of it; the rest: harness run's own arguments
main_job() {
  local log=$1 what=$2 start=$SECONDS
  shift 2
  { header "harness run${*:+ $*} ($what)"
    (cd /tmp/empty && timeout 200 harness run "$@" --report-dir "$REP")
    echo "rc=$? wall $((SECONDS - start)) s"; } > "$OUT/$log" 2>&1
  tail -2 "$OUT/$log"
}
for step in "$@"; do
  case "$step" in
    main)
      export HARNESS_CACHE_DIR=/tmp/wave-cache
      rm -rf "$HARNESS_CACHE_DIR"
      for state in cold warm; do
        # the warm run traces its timings (a JSON line each: steps, warm-up stretches)
        [ "$state" = warm ] && export HARNESS_TIMING_TRACE=$OUT/timing-trace-warm.jsonl
        main_job "default-run-$state.log" "from an empty folder, the wheel installed; $state:\
 HARNESS_CACHE_DIR empty before the cold run"
      done
      unset HARNESS_CACHE_DIR HARNESS_TIMING_TRACE ;;
    main-w100)
      export HARNESS_CACHE_DIR=/tmp/wave-cache HARNESS_TIMING_TRACE=$OUT/timing-trace-w100.jsonl
      main_job default-run-w100.log "warm caches if main ran first" --warmup-ms 100
      unset HARNESS_CACHE_DIR HARNESS_TIMING_TRACE ;;
    fp8)
      { header "$PYTEST -n 8 -m gpu (FP8, cuBLASLt, attention tests)"
        timeout 300 $PYTEST -n 8 -m gpu tests/test_fp8_gpu.py tests/test_cublaslt.py \
          tests/test_attention_gpu.py tests/test_gpu.py -k "fp8 or cublaslt or attention or scale" \
          2>&1 | quiet
        echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-fp8.log" 2>&1
      tail -3 "$OUT/pytest-fp8.log" ;;
    attn)
      { header "$PYTEST -n 8 -m gpu tests/test_attention_gpu.py tests/test_attention_timed_gpu.py"
        timeout 300 $PYTEST -n 8 -m gpu tests/test_attention_gpu.py \
          tests/test_attention_timed_gpu.py 2>&1 | quiet
        echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-attn.log" 2>&1
      tail -3 "$OUT/pytest-attn.log" ;;
    attn-compare)
      # the table of issue 63: 16K tokens a batch (B = 16384 / S), H = 16, D = 128, S = 512 to
      # 16K, causal and not, as FlashAttention-3's paper measured; then the ping-pong at the
      # other head dims beside the plain variants, at S = 4096
      table=()
      for s in 512 1024 2048 4096 8192 16384; do
        for c in "" ",causal"; do table+=(--size "B=$((16384 / s)),H=16,S=$s,D=128$c"); done
      done
      a03=cu/attention/attention_03_wgmma.cu
      { header "python3 experiments/attention_compare.py (02:d128, 03:d128, 03:d128p, S = 512" \
          "to 16K; 03 at D = 64 and 256 with and without the ping-pong at S = 4096)"
        timeout 300 python3 experiments/attention_compare.py \
          cu/attention/attention_02_online.cu:d128 $a03:d128 $a03:d128p "${table[@]}" \
          --out "$REP/attn"
        rc=$?; echo "rc=$rc"
        # a hang: the steps after this one would hang in the same kernel
        [ "$rc" = 124 ] && { tar czf "$OUT/rep.tgz" -C "$REP" .; exit 3; }
        for d in 64 256; do
          timeout 120 python3 experiments/attention_compare.py $a03:d$d $a03:d${d}p \
            --size B=4,H=16,S=4096,D=$d --size B=4,H=16,S=4096,D=$d,causal --out "$REP/attn"
          echo "rc=$?"
        done; } > "$OUT/attention-compare.log" 2>&1
      grep -v "^  \.\." "$OUT/attention-compare.log" | tail -30 ;;
    attn-4k)
      { header "python3 experiments/attention_compare.py attention_03_wgmma:d128p and :d128pp" \
          "(S = 4096 and 16K, causal and not)"
        a03=cu/attention/attention_03_wgmma.cu
        timeout 200 python3 experiments/attention_compare.py $a03:d128p $a03:d128pp \
          --size B=4,H=16,S=4096,D=128 \
          --size B=4,H=16,S=4096,D=128,causal --size B=1,H=16,S=16384,D=128 \
          --size B=1,H=16,S=16384,D=128,causal --out "$REP/attn"
        echo "rc=$?"; } > "$OUT/attention-4k.log" 2>&1
      grep -v "^  \.\." "$OUT/attention-4k.log" | tail -12 ;;
    attn-profile)
      { header "python3 experiments/attention_profile.py attention_03_wgmma:d128p (S = 4096)"
        for size in B=4,H=16,S=4096,D=128 B=4,H=16,S=4096,D=128,causal; do
          timeout 200 python3 experiments/attention_profile.py \
            cu/attention/attention_03_wgmma.cu:d128p --size "$size" --out "$REP/attn"
          echo "rc=$?"
        done; } > "$OUT/attention-profile.log" 2>&1
      tail -6 "$OUT/attention-profile.log" ;;
    sampled)
      export HARNESS_CACHE_DIR=/tmp/wave-cache HARNESS_WORKER_SAMPLE=$OUT \
        HARNESS_TIMING_TRACE=$OUT/timing-trace-sampled.jsonl
      main_job default-run-sampled.log "warm; HARNESS_WORKER_SAMPLE, HARNESS_TIMING_TRACE"
      unset HARNESS_CACHE_DIR HARNESS_WORKER_SAMPLE HARNESS_TIMING_TRACE ;;
    compare)
      { header "harness compare \$TC_ROWS --size 4096 (experiments/wave61.sh)"
        (cd /tmp/empty && timeout 200 harness compare $TC_ROWS --size 4096 --report-dir "$REP")
        echo "rc=$?"; } > "$OUT/compare-tc.log" 2>&1
      tail -2 "$OUT/compare-tc.log" ;;
    ladders)
      { header "harness run cu/memory/*.cu ptx/memory/*.ptx examples/vector_add.cu"
        timeout 450 python3 -m harness run cu/memory/*.cu ptx/memory/*.ptx \
          examples/vector_add.cu --report-dir "$REP"
        echo "rc=$?"; } > "$OUT/ladders.log" 2>&1
      tail -2 "$OUT/ladders.log" ;;
    kinds)
      { header "experiments/wave61.sh kinds: each command on a GEMM and a buffers kernel"
        for args in "run 19_wgmma_epi_bf16:s4e64 --size 2048" \
            "run cu/memory/softmax_04_pipelined.cu --size 4096x4096" \
            "compare 19_wgmma_epi_bf16:s4e64 19_wgmma_epi_bf16:s4e128 --size 2048" \
            "compare cu/memory/softmax_03_cached.cu cu/memory/softmax_04_pipelined.cu --size 4096x4096" \
            "check 19_wgmma_epi_bf16:s4e64" "check cu/memory/sum_07_tuned.cu" \
            "check --plan 19_wgmma_epi_bf16:s4e64" \
            "check --plan cu/attention/attention_02_online.cu" \
            "build cu/attention/attention_01_naive.cu cu/attention/attention_02_online.cu" \
            "tune 03_smem_tiled --size 1024 --param TILE=16,32 --gpus 0" \
            "tune cu/memory/sum_07_tuned.cu --size 1<<26 --param THREADS=256,512 --param UNROLL=4 --param BPS=4 --param WAVES=1 --param CHUNKED=1 --gpus 0" \
            "profile 19_wgmma_epi_bf16:s4e64 --size 2048" \
            "profile cu/memory/softmax_04_pipelined.cu --size 2048x4096" \
            "ceiling"; do
          echo "== harness $args"
          start=$SECONDS
          # check and build write no report (they refuse --report-dir)
          case "$args" in check*|build*) rep=() ;; *) rep=(--report-dir "$REP") ;; esac
          timeout 100 python3 -m harness $args "${rep[@]}" 2>&1 | grep -v "^      " \
            | tail -25
          echo "== rc=${PIPESTATUS[0]} in $((SECONDS - start)) s"
        done; } > "$OUT/kinds.log" 2>&1
      grep "^== rc" "$OUT/kinds.log" ;;
    gpu-rest)
      gpu_rest ""
      tail -3 "$OUT/pytest-gpu-rest.log" ;;
    gpu-main)
      { header "$PYTEST -n 8 -m gpu tests/test_gpu.py"
        timeout 570 $PYTEST -n 8 -m gpu tests/test_gpu.py 2>&1 | quiet
        echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-gpu-main.log" 2>&1
      tail -3 "$OUT/pytest-gpu-main.log" ;;
    rest+cpu)
      # the CPU tests beside the other GPU tests, to save a device call's minutes: they cannot
      # reach the GPU (tests/conftest.py hides it from a test without the gpu marker), and on
      # 4 of the host's 16 cores they leave the GPU tests' workers their own
      { header "$PYTEST -n 4 -m 'not gpu' (beside gpu-rest)"
        timeout 560 $PYTEST -n 4 -m "not gpu" 2>&1 | quiet
        echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-cpu.log" 2>&1 &
      cpu_pid=$!
      gpu_rest " (beside the CPU tests)"
      wait "$cpu_pid"
      tail -n 3 "$OUT/pytest-gpu-rest.log" "$OUT/pytest-cpu.log" ;;
    cpu)
      { header "$PYTEST -n 16 -m 'not gpu'"
        timeout 560 $PYTEST -n 16 -m "not gpu" 2>&1 | quiet
        echo "pytest rc=${PIPESTATUS[0]}"; } > "$OUT/pytest-cpu.log" 2>&1
      tail -3 "$OUT/pytest-cpu.log" ;;
    fp8probe)
      { header "python3 experiments/fp8_accumulation.py (issue 57: mixed signs)"
        timeout 120 python3 experiments/fp8_accumulation.py "$OUT/fp8-accumulation.json"
        echo "rc=$?"; } > "$OUT/fp8-accumulation.log" 2>&1
      grep -c "model: toward zero" "$OUT/fp8-accumulation.log"
      grep -E "mixed_signs|c_negative" "$OUT/fp8-accumulation.log" | head -4
      tail -1 "$OUT/fp8-accumulation.log" ;;
    *) echo "unknown step: $step" >&2; exit 2 ;;
  esac
  tar czf "$OUT/rep.tgz" -C "$REP" . 2>/dev/null
done
