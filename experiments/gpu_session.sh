#!/usr/bin/env bash
# One GPU session on a registry-less host (see README): install the carried wheels, then run
# the tests and the given harness steps, copying logs and reports under $OUT.
# Usage: bash experiments/gpu_session.sh STEP...   steps: tests, run, ceiling, sweep, sass, ncu,
#   tc-compare, tc-epi, tc-run, copy-cost, epi-cost, tc-2cta, tc-best, placement,
#   tc-cluster, tc-cluster-x2, l2-state, kernel-clock, ceiling-cycles,
#   tc-profile, energy, energy-parts (the tensor-core rungs of issue 4), multi-gpu (issue 24),
#   code-warmth, power-context (issue 21), verify (issue 33), buffers, buffers-more
#   (issue 35), minute, minute-after, minute-all, all-before, cold-once, profiled, replay,
#   some-tests, timing-cost, sampled, sampled-warm, traced-warm, blas-threads, stamped, traced,
#   round-cost, graph-replicas, ab-warm (issue 37), fp8,
#   fp8-block (issue 36), small-sizes (issue 62)
set -uo pipefail
OUT=${OUT:-/tmp/out}
# reports of this session's runs: outside $OUT (a device call brings back few files), packed
# into $OUT/new-reports.tgz after every step
REP=/tmp/rep
mkdir -p "$OUT" "$REP"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
# the project's wheel brings its entry points (pytest plugin, `harness`); its code is the
# checkout's, first on the path, with the wheel's copy removed
rm -rf /tmp/site/harness
export PYTHONPATH=$PWD:/tmp/site PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
    --format=csv; python3 -c 'import cuda.bindings, numpy; print("cuda-bindings",
    cuda.bindings.__version__, "numpy", numpy.__version__)'
  lscpu | grep -E "^Model name|^CPU\(s\)"; } 2>&1 | tee "$OUT/env.txt"
# the first lines of a report: date, GPU and driver, and the command that wrote it
header() {
  date -u +"%Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  echo "command: $*"
  echo "commit ${HARNESS_GIT_COMMIT:-$(git rev-parse HEAD 2>/dev/null)}"
}
HMMA_METRICS=gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second
HMMA_METRICS+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
# knob_cost STEP REPORT REPEATS METRICS KERNEL... -- SETTING...: every kernel as built ("") and
# with each measurement knob setting, REPEATS launches at 4096 under Nsight Compute, into
# reports/h100/REPORT (the knobs give wrong results by design: the launches are unchecked)
knob_cost() {
  local step=$1 report=$2 repeats=$3 metrics=$4 kernels=() k p; shift 4
  while [ "$1" != -- ]; do kernels+=("$1"); shift; done; shift
  { header "bash experiments/gpu_session.sh $step (ncu --clock-control none --cache-control all;" \
      "unchecked launches, $(echo $*) give wrong results by design)"
    for k in "${kernels[@]}"; do
      for p in "$@"; do
        echo "== $k ${p:-as built}"
        ncu --clock-control none --cache-control all --profile-from-start off -k hgemm_mma_sync -c "$repeats" \
          --metrics "$metrics" python3 -m harness launch "$k" --size 4096 \
          --repeats "$repeats" ${p:+--param $p} 2>&1 | grep -E "duration|per_second|pct"
      done
    done; } 2>&1 | tee "reports/h100/$report"
}
# observed_run NAME WHAT VAR=VALUE: the default run with empty caches and VAR set (an
# observer of where its time goes), logged to $OUT/default-run-NAME.log with its wall time
observed_run() {
  local name=$1 what=$2 start=$SECONDS; shift 2
  env HARNESS_CACHE_DIR="/tmp/$name-cache-$$" "$@" timeout 300 python3 -m harness run \
    --report-dir "$REP" > "$OUT/default-run-$name.log" 2>&1
  echo "$(date -u +%FT%TZ) default run, $what: $((SECONDS - start)) s wall" \
    | tee -a "$OUT/default-run-$name.log"
  tail -6 "$OUT/default-run-$name.log"
}
# fill_caches NAME: empty compile and SASS caches of their own (HARNESS_CACHE_DIR, exported),
# filled by one default run logged to $OUT/default-run-fill.log: the warm runs after it
fill_caches() {
  export HARNESS_CACHE_DIR=/tmp/$1-cache-$$
  timeout 300 python3 -m harness run --report-dir "$REP" > "$OUT/default-run-fill.log" 2>&1
  tail -3 "$OUT/default-run-fill.log"
}
# stamp: each line of stdin headed by the seconds since the filter started (with the command
# it follows in a pipe)
stamp() {
  python3 -u -c '
import sys, time
t0 = time.perf_counter()
for line in sys.stdin:
    sys.stdout.write(f"{time.perf_counter() - t0:7.2f} {line}")'
}
source experiments/tc_rows.sh  # TC_ROWS
for step in "$@"; do
  case "$step" in
    tests)  # the whole suite in one run, its log headed with where and at what commit it ran;
      # pytest-xdist on 8 workers (387 s at dfebb8d): a GPU test that times has the GPU to
      # itself, checks that time nothing share it (tests/conftest.py, _gpu_turns), so that the
      # suite fits one device command
      { header "python3 -m pytest -q -p no:cacheprovider -n 8 --durations=60"
        timeout 590 python3 -m pytest -q -p no:cacheprovider -n 8 --durations=60 2>&1
        echo "pytest rc=$?"; } > "$OUT/pytest.log" 2>&1; tail -25 "$OUT/pytest.log" ;;
    replay)  # the suite at 2ee7dad: why cached_replay passed (notes/verification.md); then
      # the adversarial test alone
      # the absolute 500 us window (as at 2ee7dad) with and without the primer, then the
      # window that follows the fixture's computing time (as now)
      { header "python3 experiments/replay_probe.py --repeat 2 (4 settings)"
        for args in "--per-compute 0 --prime-below 0" "--per-compute 0" \
                    "--per-compute 3 --prime-below 0" "--per-compute 3"; do
          python3 experiments/replay_probe.py --repeat 2 $args 2>&1
        done; } | tee "$OUT/replay-probe.log"
      { header "python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k 'fool or adapt'"
        timeout 200 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py \
          -k 'fool or adapt' 2>&1
        echo "pytest rc=$?"; } > "$OUT/adversarial-test.log" 2>&1; tail -5 "$OUT/adversarial-test.log" ;;
    some-tests)  # the GPU tests of the files in $TESTS (8 workers), logged as the suite is
      { header "python3 -m pytest -q -p no:cacheprovider -n 8 $TESTS"
        timeout 300 python3 -m pytest -q -p no:cacheprovider -n 8 $TESTS 2>&1
        echo "pytest rc=$?"; } > "$OUT/some-tests.log" 2>&1; tail -25 "$OUT/some-tests.log" ;;
    run) python3 -m harness run --size 1024 --size 2048 --size 4096 2>&1 | tee "$OUT/run.log" ;;
    buffers)  # issue 35: the buffers kind's GPU tests, its two ladders and the example, the
      # wrong kernels (each must fail with its cause)
      python3 -m pytest -q -p no:cacheprovider tests/test_buffers.py \
        tests/test_memory_baselines.py 2>&1 | tail -30 | tee "$OUT/buffers-tests.log"
      python3 -m harness run cu/memory/*.cu ptx/memory/*.ptx examples/vector_add.cu \
        --report-dir "$REP" 2>&1 | tee "$OUT/ladders.log"
      python3 -m harness run tests/kernels/wrong_memory/*.cu --report-dir "$REP" --wide 2>&1 \
        | tee "$OUT/wrong-memory.log" ;;
    verify)  # issue 33: the adaptive fixtures and the examples by path, then the default run
      # once (its wall time)
      python3 -m harness run tests/kernels/adaptive/*.cu --size 512 --report-dir "$REP" 2>&1 \
        | tee "$OUT/adaptive.log"
      python3 -m harness run examples/*.cu --size 1024 --report-dir "$REP" 2>&1 \
        | tee "$OUT/examples.log"
      start=$SECONDS
      python3 -m harness run --report-dir "$REP" 2>&1 | tee "$OUT/default-run.log"
      echo "$(date -u +%FT%TZ) default run (python3 -m harness run): $((SECONDS - start)) s" \
        "wall" | tee -a "$OUT/default-run.log" ;;
    minute)  # issue 37: the default run on this (fresh) machine, its worker under cProfile;
      # the wall time, then where the worker's time went (cumulative, top 45)
      mkdir -p "$OUT/prof"
      start=$SECONDS
      HARNESS_WORKER_PROFILE="$OUT/prof" timeout 400 python3 -m harness run --report-dir "$REP" \
        2>&1 | tee "$OUT/default-run.log"
      echo "$(date -u +%FT%TZ) default run (python3 -m harness run, worker profiled):" \
        "$((SECONDS - start)) s wall" | tee -a "$OUT/default-run.log"
      for f in "$OUT"/prof/*.prof; do
        python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative')
s.print_stats(45); s.sort_stats('tottime'); s.print_stats(25)" "$f" > "${f%.prof}.txt" 2>&1
      done ;;
    minute-after)  # issue 37: the default run with empty compile and SASS caches (cold), then
      # at once again (warm), then the tensor-core rows at 4096 interleaved (each row of the
      # runs against the compare: harness diff)
      # every line of the runs' logs headed by the seconds since the command (the first row's
      # time from the command, not from the harness's own clock)
      export HARNESS_CACHE_DIR=/tmp/cold-cache-$$
      for state in cold warm; do
        start=$SECONDS
        timeout 300 python3 -m harness run --report-dir "$REP" 2>&1 | stamp \
          | tee "$OUT/default-run-$state.log" | grep -v "^ *[0-9.]*       "
        echo "$(date -u +%FT%TZ) default run, $state (python3 -m harness run):" \
          "$((SECONDS - start)) s wall" | tee -a "$OUT/default-run-$state.log"
      done
      timeout 200 python3 -m harness compare $TC_ROWS --size 4096 --report-dir "$REP" 2>&1 \
        | tee "$OUT/compare-tc.log" | grep -v "^      " | tail -30 ;;
    minute-all)  # issue 37, item 3: `harness run --all` (every variant of every kernel file
      # at the default sizes) with empty compile and SASS caches (cold), then at once (warm;
      # STATES=cold: the cold run only)
      export HARNESS_CACHE_DIR=/tmp/all-cache-$$
      for state in ${STATES:-cold warm}; do
        start=$SECONDS
        { header "python3 -m harness run --all ($state)"
          timeout 280 python3 -m harness run --all --report-dir "$REP" 2>&1; } \
          | tee "$OUT/all-run-$state.log" | grep -v "^      " | tail -4
        echo "$(date -u +%FT%TZ) harness run --all, $state: $((SECONDS - start)) s wall" \
          | tee -a "$OUT/all-run-$state.log"
      done ;;
    all-before)  # issue 37, item 3, before: `harness run --all` cold at $BEFORE (default
      # 2ee7dad) from a git worktree of this checkout's history, where the device has it
      before=${BEFORE:-2ee7dad}
      if git worktree add -f /tmp/before "$before" > /dev/null 2>&1; then
        start=$SECONDS
        { header "python3 -m harness run --all at $before (cold)"
          cd /tmp/before && HARNESS_CACHE_DIR=/tmp/before-cache-$$ \
            PYTHONPATH=/tmp/before:/tmp/site timeout 400 python3 -m harness run --all \
            --report-dir "$REP" 2>&1; cd - > /dev/null; } \
          | tee "$OUT/all-run-before-$before.log" | grep -v "^      " | tail -4
        echo "$(date -u +%FT%TZ) harness run --all at $before, cold: $((SECONDS - start))" \
          "s wall" | tee -a "$OUT/all-run-before-$before.log"
      else
        echo "no worktree of $before here: no before run" | tee "$OUT/all-run-before.log"
      fi ;;
    timing-cost)  # issue 37: where a small size's timing goes (the L2 flush, cuBLAS's error)
      # and what --max-rel-se 0.5 would save and cost in agreement (experiments/timing_cost.py)
      { header "python3 experiments/timing_cost.py"
        timeout 300 python3 experiments/timing_cost.py 2>&1; } | tee "$OUT/timing-cost.log" \
        | tail -40 ;;
    cold-once)  # issue 37: the default run with empty compile and SASS caches, once
      export HARNESS_CACHE_DIR=/tmp/cold-cache-$$
      start=$SECONDS
      timeout 300 python3 -m harness run --report-dir "$REP" 2>&1 \
        | tee "$OUT/default-run-cold.log" | grep -v "^      " | tail -8
      echo "$(date -u +%FT%TZ) default run, cold (python3 -m harness run):" \
        "$((SECONDS - start)) s wall" | tee -a "$OUT/default-run-cold.log" ;;
    profiled)  # issue 37: the default run again (after minute-after: its caches warm), its
      # worker under cProfile: where the time goes (cumulative, then own time)
      mkdir -p "$OUT/prof"
      start=$SECONDS
      HARNESS_WORKER_PROFILE="$OUT/prof" timeout 300 python3 -m harness run --report-dir "$REP" \
        > "$OUT/default-run-profiled.log" 2>&1
      echo "$(date -u +%FT%TZ) default run, worker profiled: $((SECONDS - start)) s wall" \
        | tee -a "$OUT/default-run-profiled.log"
      tail -4 "$OUT/default-run-profiled.log"
      for f in "$OUT"/prof/*.prof; do
        python3 -c "import pstats,sys; s=pstats.Stats(sys.argv[1]); s.sort_stats('cumulative')
s.print_stats(70); s.sort_stats('tottime'); s.print_stats(40); s.sort_stats('cumulative')
s.print_callees(r'time_sustained|time_interleaved|warm_up|_replayed|\(checked\)|kernel_checks|check_one|\(prepare\)|\(measure\)|\(timed\)')" \
          "$f" > "${f%.prof}.txt" 2>&1
        rm -f "$f"
      done ;;
    sampled)  # issue 37: the default run (empty caches), its worker's main thread sampled
      # every 2 ms (harness/bench/wall_sampler.py): where its wall goes, waits included
      mkdir -p "$OUT/sampled"
      observed_run sampled "worker sampled" HARNESS_WORKER_SAMPLE="$OUT/sampled" \
        HARNESS_TIMING_TRACE="$OUT/timing-trace-sampled.txt" ;;
    sampled-warm)  # issue 37: the default run once to fill the caches, then again (warm) with
      # its worker's main thread sampled and its timings traced
      fill_caches sw
      mkdir -p "$OUT/sampled"
      start=$SECONDS
      HARNESS_WORKER_SAMPLE="$OUT/sampled" HARNESS_TIMING_TRACE="$OUT/timing-trace-warm.txt" \
        timeout 300 python3 -m harness run --report-dir "$REP" 2>&1 | stamp \
        > "$OUT/default-run-sampled-warm.log"
      echo "$(date -u +%FT%TZ) default run, warm, worker sampled: $((SECONDS - start)) s wall" \
        | tee -a "$OUT/default-run-sampled-warm.log"; tail -6 "$OUT/default-run-sampled-warm.log"
      unset HARNESS_CACHE_DIR ;;
    blas-threads)  # issue 37: the host's comparisons with OpenBLAS's thread pool at its
      # default and at one thread (experiments/blas_threads.py), then the default run once to
      # fill the caches and three warm runs: as it is, with OPENBLAS_NUM_THREADS=1, as it is
      { header "python3 experiments/blas_threads.py"
        timeout 200 python3 experiments/blas_threads.py 2>&1; } | tee "$OUT/blas-threads.log"
      fill_caches bt
      for run in a:default b:1 c:default; do
        name=${run%%:*} blas=${run#*:} start=$SECONDS
        ( [ "$blas" = default ] || export OPENBLAS_NUM_THREADS=$blas
          timeout 300 python3 -m harness run --report-dir "$REP" 2>&1 | stamp \
            > "$OUT/default-run-warm-$name.log" )
        echo "$(date -u +%FT%TZ) default run, warm, OPENBLAS_NUM_THREADS=$blas:" \
          "$((SECONDS - start)) s wall" | tee -a "$OUT/default-run-warm-$name.log"
        grep -A5 "wall time" "$OUT/default-run-warm-$name.log" | head -3
      done
      unset HARNESS_CACHE_DIR ;;
    traced-warm)  # issue 37: the default run once to fill the caches, then again (warm) with
      # each sustained timing's steps traced (no sampler: its host work stays the run's own)
      fill_caches tw
      start=$SECONDS
      HARNESS_TIMING_TRACE="$OUT/timing-trace-warm.txt" timeout 300 python3 -m harness run \
        --report-dir "$REP" 2>&1 | stamp > "$OUT/default-run-traced-warm.log"
      echo "$(date -u +%FT%TZ) default run, warm, timings traced: $((SECONDS - start)) s wall" \
        | tee -a "$OUT/default-run-traced-warm.log"; tail -6 "$OUT/default-run-traced-warm.log"
      unset HARNESS_CACHE_DIR ;;
    stamped)  # issue 37: the default run (empty caches), every line of its log headed by the
      # seconds since the command (what the first row waits on), its timings traced
      start=$SECONDS
      HARNESS_CACHE_DIR=/tmp/stamped-cache-$$ HARNESS_TIMING_TRACE="$OUT/timing-trace.txt" \
        timeout 300 python3 -m harness run --report-dir "$REP" 2>&1 | stamp \
        > "$OUT/default-run-stamped.log"
      echo "$(date -u +%FT%TZ) default run, stamped: $((SECONDS - start)) s wall" \
        | tee -a "$OUT/default-run-stamped.log"; tail -4 "$OUT/default-run-stamped.log" ;;
    traced)  # issue 37: the default run (empty caches), each sustained timing's steps traced
      # (host wall per step, GPU time of its batches: HARNESS_TIMING_TRACE, sustained.py),
      # the trace written as .txt (a .jsonl in reports/ is read as a run's stream)
      observed_run traced "timings traced" HARNESS_TIMING_TRACE="$OUT/timing-trace.txt" ;;
    round-cost)  # issue 37: what one timed round costs the GPU, piece by piece
      { header "python3 experiments/round_cost.py"
        timeout 200 python3 experiments/round_cost.py 2>&1; } | tee "$OUT/round-cost.log" \
        | tail -60 ;;
    graph-replicas)  # issue 37: a batch captured once and instantiated three times, its
      # event nodes moved to each copy's own events, against three captures (host time)
      { header "python3 experiments/graph_replicas.py"
        timeout 120 python3 experiments/graph_replicas.py 2>&1; } \
        | tee "$OUT/graph-replicas.log" | tail -20 ;;
    fp8)  # issue 36: cuBLASLt FP8 alone, the FP8 GPU tests (fixtures, baseline, ceiling, the
      # rung's battery), then the rung's variants run and compared with cuBLASLt FP8 at 4096,
      # 8192 and 8192 x 8192 x 4096 (the published comparison's shape)
      { header "python3 experiments/fp8_cublaslt.py"
        timeout 150 python3 experiments/fp8_cublaslt.py 2>&1; } | tee "$OUT/fp8-cublaslt.log"
      { header "python3 -m pytest -q -p no:cacheprovider --tb=short (the FP8 GPU tests)"
        timeout 300 python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_fp8_gpu.py \
          tests/test_cublaslt.py tests/test_ceiling.py "tests/test_gpu.py::test_numerics" \
          tests/test_gpu_reference.py \
          -k "fp8 or FP8 or lt or reference" 2>&1; } > "$OUT/fp8-tests.log"; tail -30 "$OUT/fp8-tests.log"
      timeout 120 python3 -m harness run tests/kernels/fp8/*.cu --size 512 --report-dir "$REP" \
        2>&1 | tee "$OUT/fp8-fixtures.log" | grep -v "^      " | tail -30
      timeout 200 python3 -m harness run ptx/hgemm/20_wgmma_fp8.ptx --size 4096 --size 8192 \
        --report-dir "$REP" 2>&1 | tee "$OUT/fp8-run.log" | grep -v "^      "
      timeout 200 python3 -m harness compare 20_wgmma_fp8:${FP8_ROW:-s4e64} \
        19_wgmma_epi_bf16:s4e64 --size 4096 --size 8192 --size 8192,8192,4096 \
        --report-dir "$REP" 2>&1 | tee "$OUT/fp8-compare.log" | grep -v "^      " ;;
    fp8-block)  # issue 36: the FP8 GPU tests with the block-scaled fixtures, then rung 21
      # (block scales) beside rung 20 (per tensor, and its 128 x 128 tile) at 4096 and 8192
      { header "python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_fp8_gpu.py"
        timeout 200 python3 -m pytest -q -p no:cacheprovider --tb=short tests/test_fp8_gpu.py \
          2>&1; } > "$OUT/fp8-block-tests.log"; tail -20 "$OUT/fp8-block-tests.log"
      timeout 240 python3 -m harness compare 21_wgmma_fp8_block:s6 21_wgmma_fp8_block:s4 \
        20_wgmma_fp8:s4e64 20_wgmma_fp8:n128s6 --size 4096 --size 8192 --report-dir "$REP" \
        2>&1 | tee "$OUT/fp8-block-compare.log" | grep -v "^      " ;;
    buffers-more)  # issue 35's second half: tune the sum's shape at 2^28 (ranked by GB/s),
      # then the GPU tests of tune, --gpus, compare, the plugin and the API for buffers kernels
      python3 -m harness tune cu/memory/sum_07_tuned.cu --size "1<<28" --report-dir "$REP" \
        2>&1 | tee "$OUT/tune-sum.log"
      python3 -m pytest -q -p no:cacheprovider tests/test_buffers_spread.py \
        tests/test_buffers_api.py tests/test_buffers_plugin.py 2>&1 | tail -15 \
        | tee "$OUT/buffers-more-tests.log" ;;
    default-runs)  # issue 21: the default run twice (its cost, its stability); compare-tc
      # sets the tensor-core rows against compare
      for i in 1 2; do
        start=$SECONDS
        python3 -m harness run --report-dir "$REP" 2>&1 | tee "$OUT/default-run-$i.log"
        echo "$(date -u +%FT%TZ) default run $i (python3 -m harness run): $((SECONDS - start)) s" \
          "wall" | tee -a "$OUT/default-run-cost.txt"
      done
      ;;
    power-context)  # issue 21: a compare's round against a run's pair at 4096: cool, hot,
      # soaked, and with each pair dwelling in the round (power_context.py; PC_ARGS adds
      # arguments: --modes)
      timeout 500 python3 experiments/power_context.py --size 4096 ${PC_ARGS:-} \
        --report-dir "$REP" 2>&1 \
        | tee "$OUT/power-context.log" ;;
    code-warmth)  # issue 21: the primer and placements at small sizes (code_warmth.py)
      timeout 420 python3 experiments/code_warmth.py --size 512 --size 1024 \
        --report-dir "$REP" 2>&1 | tee "$OUT/code-warmth.log" ;;
    variance)  # issue 21: where the run-to-run spread of % cuBLAS comes from, twice (two
      # processes), reports straight under $OUT
      for i in 1 2; do
        timeout 200 python3 experiments/tc_variance.py --report-dir "$REP" 2>&1 \
          | tee "$OUT/variance-$i.log"
      done ;;
    variance-small)  # issue 21: cuBLAS at 512 in three processes, the same operands and fresh
      # allocations in each (does cuBLAS's time follow the process or the addresses?)
      for i in 1 2 3; do
        timeout 150 python3 experiments/tc_variance.py --size 512 --trials 4 \
          --report-dir "$REP" 15_wgmma_tma_fp16:m128n256 15_wgmma_tma_bf16:m128n256 \
          19_wgmma_epi_fp16:s4e64 2>&1 | tee "$OUT/variance-small-$i.log"
      done ;;
    sig-gpu)  # issue 22: the signature examples (clusters of 16, spread order), then tune and
      # profile of the fast.cu-style example
      timeout 120 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k signatures \
        2>&1 | tail -15 | tee "$OUT/pytest-signatures.log"
      timeout 150 python3 -m harness tune examples/wgmma_cluster_bf16.cu --size 4096 \
        --param STAGES=3,4 --param CLUSTER=1,2 --param MC=0,1 --report-dir "$REP" \
        2>&1 | tee "$OUT/tune-wgmma-example.log"
      timeout 150 python3 -m harness profile examples/wgmma_cluster_bf16.cu --size 4096 \
        --report-dir "$REP" 2>&1 | tee "$OUT/profile-wgmma-example.log" ;;
    compare-tc)  # issue 21: the default run's tensor-core rows at its sizes, all interleaved
      timeout 400 python3 -m harness compare $TC_ROWS --size 512 --size 1024 --size 2048 \
        --size 4096 --report-dir "$REP" \
        2>&1 | tee "$OUT/compare-tc.log" ;;
    ab-warm)  # issue 37: warm default runs on one host, one per variant of $VARIANTS, after
      # one run that fills the caches: HEAD; omp=N (OMP_NUM_THREADS=N: the host's comparison
      # threads and OpenBLAS's); threads=N (HARNESS_COMPARE_THREADS: the comparisons'
      # alone); host-sums (HARNESS_HOST_SUMS: the timed size's comparisons on the host, as
      # before 2026-11-28); rev=SHA (that commit, from a git worktree, on the same caches); hosts differ
      # by up to 20% (issue 37), so that what differs is the variant alone
      fill_caches ab
      i=0
      for variant in ${VARIANTS:-HEAD}; do
        i=$((i + 1)) start=$SECONDS name=$i-${variant//=/-}
        case "$variant" in
          omp=*) env OMP_NUM_THREADS="${variant#omp=}" timeout 300 python3 -m harness run \
                   --report-dir "$REP" > "$OUT/ab-$name.log" 2>&1 ;;
          threads=*) env HARNESS_COMPARE_THREADS="${variant#threads=}" timeout 300 python3 \
                   -m harness run --report-dir "$REP" > "$OUT/ab-$name.log" 2>&1 ;;
          host-sums) env HARNESS_HOST_SUMS=1 timeout 300 python3 -m harness run \
                   --report-dir "$REP" > "$OUT/ab-$name.log" 2>&1 ;;
          rev=*) rev=${variant#rev=}
                 git worktree add -f "/tmp/ab-$rev" "$rev" > /dev/null 2>&1
                 (cd "/tmp/ab-$rev" && PYTHONPATH="/tmp/ab-$rev:/tmp/site" timeout 300 \
                   python3 -m harness run --report-dir "$REP") > "$OUT/ab-$name.log" 2>&1 ;;
          *) timeout 300 python3 -m harness run --report-dir "$REP" > "$OUT/ab-$name.log" \
               2>&1 ;;
        esac
        echo "$(date -u +%FT%TZ) warm default run, $variant: $((SECONDS - start)) s wall" \
          | tee -a "$OUT/ab-$name.log" | tee -a "$OUT/ab-warm.log"
        grep -A4 "wall time" "$OUT/ab-$name.log" | head -5 >> "$OUT/ab-warm.log"
        grep -A1 "wall time" "$OUT/ab-$name.log" | head -2
      done
      unset HARNESS_CACHE_DIR ;;
    tc-state)  # issue 21: compare of the tensor-core rows with 300 ms of warm-up per kernel
      # (18 x 300 ms), then again as by default, NVML's temperature, clock and power sampled
      # every 100 ms throughout
      nvidia-smi --query-gpu=timestamp,temperature.gpu,clocks.sm,power.draw \
        --format=csv -lms 100 > "$OUT/smi.csv" 2>&1 & smi=$!
      timeout 200 python3 -m harness compare $TC_ROWS --size 4096 --warmup-ms 5400 \
        --report-dir "$REP" 2>&1 | tee "$OUT/compare-tc-warm.log"
      timeout 200 python3 -m harness compare $TC_ROWS --size 4096 --report-dir "$REP" 2>&1 \
        | tee "$OUT/compare-tc-after.log"
      kill $smi ;;
    examples)  # issue 22: kernels in their own signatures, by path, beside built-in rungs
      python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "signatures or textbook" \
        2>&1 | tail -30 | tee "$OUT/pytest-examples.log"
      python3 -m harness run examples/colmajor_sgemm.cu examples/abt_bf16.cu \
        examples/gemm_d_fp16.cu examples/wgmma_cluster_bf16.cu 10_hoisted 19_wgmma_epi_bf16:s4e64 \
        --size 1024 --size 4096 2>&1 | tee "$OUT/run-examples.log"
      python3 -m harness compare examples/wgmma_cluster_bf16.cu 19_wgmma_epi_bf16:s4e64 \
        --size 4096 --size 8192 2>&1 | tee "$OUT/compare-wgmma-example.log" ;;
    multi-gpu)  # issue 24: harness tune of 10_hoisted's 64-point space at 4096 and harness
      # run --all at 1024, each on one GPU (no --gpus), with --gpus all and through a local
      # Dask cluster of one worker per GPU, one after the other, the caches filled first;
      # MG_CONFIGS picks some (KIND:LABEL words, all six by default), so that they fit device
      # commands; MG_TUNE_ARGS and MG_RUN_ARGS add arguments (sizes). Wall times to $MG/walls.txt; the reports and logs packed into
      # $OUT/mg.tgz and compared (experiments/multi_gpu_report.py)
      MG=/tmp/mg; mkdir -p "$MG"
      nvidia-smi -L | tee "$OUT/gpus.txt"
      python3 experiments/warm_caches.py --tune 10_hoisted > "$MG/warm.log" 2>&1
      tail -1 "$MG/warm.log"
      for config in ${MG_CONFIGS:-tune:one tune:all tune:dask run:one run:all run:dask}; do
        kind=${config%%:*} label=${config##*:}
        case "$kind:$label" in
          tune:*) cmd=(python3 -m harness tune 10_hoisted ${MG_TUNE_ARGS:-}) limit=300 ;;
          run:*) cmd=(python3 -m harness run --all ${MG_RUN_ARGS:---size 1024}) limit=400 ;;
        esac
        case "$label" in all) cmd+=(--gpus all) ;; dask) cmd+=(--cluster local) ;; esac
        rm -rf "${MG:?}/$kind-$label"; t0=$(date +%s.%N)
        timeout "$limit" "${cmd[@]}" --report-dir "$MG/$kind-$label" > "$MG/$kind-$label.log" 2>&1
        rc=$?
        echo "$kind $label $(awk "BEGIN { printf \"%.1f\", $(date +%s.%N) - $t0 }") $rc" \
          | tee -a "$MG/walls.txt"
        tail -2 "$MG/$kind-$label.log"
        tar czf "$OUT/mg.tgz" -C "$MG" .
      done
      python3 experiments/multi_gpu_report.py "$MG" 2>&1 | tail -30 ;;
    known)  # issue 21: known-duration kernels in every regime
      python3 experiments/known_duration.py 2>&1 | tee "$OUT/known.log" ;;
    small)  # issue 21: run and profile of one tensor-core kernel at 1024, both regimes
      python3 -m harness run 19_wgmma_epi_bf16:s4e64 --size 1024 2>&1 | tee "$OUT/small-run.log"
      python3 -m harness run --hot 19_wgmma_epi_bf16:s4e64 --size 1024 2>&1 \
        | tee "$OUT/small-run-hot.log"
      python3 -m harness profile 19_wgmma_epi_bf16:s4e64 --size 1024 --metrics time \
        --repeats 5 2>&1 | tee "$OUT/small-profile.log" ;;
    notebook)  # issue 23: the seeds notebook executed end to end, outputs kept
      python3 -c "import nbclient, nbformat; p='examples/seeds_story.ipynb'; \
nb = nbformat.read(p, as_version=4); \
nbclient.NotebookClient(nb, timeout=600, kernel_name='python3').execute(); \
nbformat.write(nb, p)" 2>&1 | tail -20 | tee "$OUT/notebook.log"
      cp examples/seeds_story.ipynb "$OUT/" ;;
    ceiling) python3 -m harness ceiling 2>&1 | tee "$OUT/ceiling.log" ;;
    sweep) python3 -m harness occupancy --sweep 2>&1 | tee "$OUT/sweep.log" ;;
    sass) python3 -m harness sass 2>&1 | tee "$OUT/sass.txt" ;;
    ncu)
      for k in 03_smem_tiled:t32; do
        ncu --clock-control none --cache-control all --profile-from-start off --metrics gpu__time_duration.sum --csv \
          python3 -m harness launch "$k" --size 4096 > "$OUT/ncu-${k/:/-}.csv" \
          2> "$OUT/ncu.err" || tail -20 "$OUT/ncu.err"
        run_json=$(ls -t reports/h100/run-*.json | head -1)
        python3 experiments/ncu_timing.py "$OUT/ncu-${k/:/-}.csv" "$run_json" "$k" --size 4096
      done ;;
    small-sizes)  # issue 62 (notes/small_sizes.md): the current best rung first, then the
      # small-tile and split-K variants, interleaved with cuBLAS at 512, 1024 and the thin
      # shapes; BF16 (19, 22), FP8 (20) and FP32 (10, 10_hoisted_small)
      SMALL=(--size 512 --size 1024 --size 512,4096,4096 --size 4096,4096,512 --budget-ms 150
        --report-dir "$REP")
      timeout 280 python3 -m harness compare 19_wgmma_epi_bf16:s4e64 19_wgmma_epi_bf16:s4e64r \
        19_wgmma_epi_bf16:s4e64rp 19_wgmma_epi_bf16:m128n128 19_wgmma_epi_bf16:m128n128c2 \
        19_wgmma_epi_bf16:m128n64 19_wgmma_epi_bf16:m64n128 19_wgmma_epi_bf16:m64n64 \
        22_wgmma_splitk_bf16 "${SMALL[@]}" 2>&1 | tee "$OUT/small-bf16.log" | grep -v "^      "
      timeout 130 python3 -m harness compare 20_wgmma_fp8:s4e64 20_wgmma_fp8:n128s6r \
        20_wgmma_fp8:m64n128 20_wgmma_fp8:m64n64 20_wgmma_fp8:n128k2 "${SMALL[@]}" 2>&1 \
        | tee "$OUT/small-fp8.log" | grep -v "^      "
      timeout 130 python3 -m harness compare 10_hoisted 10_hoisted_small "${SMALL[@]}" 2>&1 \
        | tee "$OUT/small-fp32.log" | grep -v "^      " ;;
    tc-compare)  # rungs side by side, interleaved with cuBLAS, per input precision
      python3 -m harness compare 11_mma_sync_bf16:m128n256k32s4 11_mma_sync_bf16:m128n256k32s2 \
        11_mma_sync_bf16:w32x64 11_mma_sync_bf16:mbar_k64s4l2c1 12_mma_tma_bf16:m256n128c2 \
        13_mma_persist_bf16:m256n128l3g8 --size 4096 --size 8192 2>&1 | tee "$OUT/compare-bf16.log"
      python3 -m harness compare 11_mma_sync_fp16:m128n256k32s4 11_mma_sync_fp16:mbar_k64s4l2c1 \
        12_mma_tma_fp16:m256n128c2 13_mma_persist_fp16:m256n128l3g8 --size 4096 --size 8192 \
        2>&1 | tee "$OUT/compare-fp16.log" ;;
    tc-epi)  # 16-byte C stores (EPI = 1) against the 8-byte ones, interleaved with cuBLAS
      python3 -m harness compare 12_mma_tma_bf16:m256n128c2 12_mma_tma_bf16:m256n128c2e \
        13_mma_persist_bf16:m256n128l3g8 13_mma_persist_bf16:m256n128l3g8e \
        --size 4096 --size 8192 2>&1 | tee "$OUT/compare-epi.log" ;;
    tc-run)  # every tensor-core variant, checked then timed with cuBLAS right after it
      python3 -m harness run '1[123]_mma_*' --size 4096 --size 8192 2>&1 | tee "$OUT/tc-run.log" ;;
    copy-cost)  # 11 with its copies as usual, skipped, zero-filling, or from one hot tile
      knob_cost copy-cost ncu-copy-cost-11_mma_sync_bf16.txt 3 \
        "$HMMA_METRICS,l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed" \
        11_mma_sync_bf16:m128n256k32s4 -- "" NOLOAD=1 NOLOAD=2 NOLOAD=3 ;;
    epi-cost)  # 12e as built against NOSTORE=1 (no epilogue): what storing C costs
      knob_cost epi-cost ncu-epi-cost-12_mma_tma_bf16.txt 5 "$HMMA_METRICS" \
        12_mma_tma_bf16:m256n128e 12_mma_tma_bf16:m128n128x2e -- "" NOSTORE=1 ;;
    tc-2cta)  # two 128 x 128 blocks per SM (one's epilogue under the other's K loop) against 12e
      python3 -m harness compare 12_mma_tma_bf16:m256n128e 12_mma_tma_bf16:m128n128x2e \
        13_mma_persist_bf16:m256n128l3g8e --size 4096 --size 8192 2>&1 \
        | tee "$OUT/compare-2cta.log" ;;
    tc-best)  # the best variants one at a time with cuBLAS, then 12's two-blocks-per-SM tune
      python3 -m harness run 12_mma_tma_bf16:m256n128e 12_mma_tma_bf16:m128n128x2e \
        13_mma_persist_bf16:m256n128l3g8e 12_mma_tma_fp16:m256n128e \
        12_mma_tma_fp16:m128n128x2e 12_mma_tma_fp16:m256n128c2e --size 4096 --size 8192 \
        2>&1 | tee "$OUT/tc-best.log"
      python3 -m harness tune 12_mma_tma_bf16 --param BM=128 --param BN=128 --param STAGES=3 \
        --param LOOK=1,2 --param COPYK=0,1,2 --param GM=1,8 --param MINB=2 --param EPI=1 \
        --budget-ms 80 2>&1 | tee "$OUT/tune-x2.log" ;;
    tc-cluster)  # 14 (A shared by a cluster of 2 or 4 blocks) against 12e: interleaved, then
      # one at a time with cuBLAS, then 14's tune in 80 ms points
      python3 -m harness compare 12_mma_tma_bf16:m256n128e 14_mma_cluster_bf16:m256n128e \
        14_mma_cluster_bf16:m256n128c4e --size 4096 --size 8192 2>&1 \
        | tee "$OUT/compare-cluster.log"
      python3 -m harness run 12_mma_tma_bf16:m256n128e '14_mma_cluster_*' --size 4096 \
        --size 8192 2>&1 | tee "$OUT/run-cluster.log"
      python3 -m harness tune 14_mma_cluster_bf16 --budget-ms 80 2>&1 \
        | tee "$OUT/tune-cluster.log" ;;
    tc-cluster-x2)  # two 128 x 128 blocks per SM with A shared by a cluster of two, against 12
      python3 -m harness compare 12_mma_tma_bf16:m256n128e 12_mma_tma_bf16:m128n128x2e \
        14_mma_cluster_bf16:m128n128x2e 14_mma_cluster_bf16:m256n128l3e --size 4096 \
        --size 8192 2>&1 | tee "$OUT/compare-cluster-x2.log" ;;
    l2-state)  # 12e under Nsight Compute with L2 flushed clean before each launch (all) or left
      # as the previous launch wrote it (none: its C dirty), 5 launches each at 4096
      k=12_mma_tma_bf16:m256n128e
      { header "bash experiments/gpu_session.sh l2-state (ncu --clock-control none --cache-control" \
          "all, then none; $k at 4096, 5 launches each)"
        for cc in all none; do
          echo "== --cache-control $cc"
          ncu --clock-control none --cache-control $cc -k hgemm_mma_sync -c 5 --metrics \
            gpu__time_duration.sum,sm__cycles_elapsed.max,sm__cycles_elapsed.avg.per_second,dram__bytes_read.sum,dram__bytes_write.sum \
            python3 -m harness launch "$k" --size 4096 --repeats 5 2>&1 \
            | grep -E "duration|cycles|bytes"
        done; } 2>&1 | tee reports/h100/ncu-l2-state-12_mma_tma_bf16.txt ;;
    kernel-clock)  # the SM clock inside the kernel against NVML's sample (CLOCKREC = 1)
      python3 experiments/kernel_clock.py 12_mma_tma_bf16:m256n128e 12_mma_tma_bf16:m128n128x2e \
        14_mma_cluster_bf16:m256n128e --size 4096 2>&1 | tee "$OUT/kernel-clock.log" ;;
    ceiling-cycles)  # the bf16 mma.sync ceiling's SM cycles per launch under Nsight Compute
      # (its 2 check launches skipped, then 3 timed ones): FLOP per cycle, to set 12e's against
      { header "bash experiments/gpu_session.sh ceiling-cycles (ncu --clock-control none" \
          "--launch-skip 2 -c 3 on harness ceiling --precision bf16 --budget-ms 50)"
        ncu --clock-control none -k mma_sync_ceiling_bf16 --launch-skip 2 -c 3 --metrics \
          gpu__time_duration.sum,sm__cycles_elapsed.avg,sm__cycles_elapsed.avg.per_second \
          python3 -m harness ceiling --precision bf16 --budget-ms 50 \
          --report-dir "$OUT/ceiling-under-ncu" 2>&1 \
          | grep -E "duration|cycles|iterations|GFLOP|bf16"; } 2>&1 \
        | tee reports/h100/ncu-ceiling-cycles-bf16.txt ;;
    placement)  # which SM each block of a first wave lands on (two 128 x 128 blocks per SM)
      { header "python3 experiments/block_placement.py --threads 128 --smem 98352 --per-sm 2"
        python3 experiments/block_placement.py --threads 128 --smem 98352 --per-sm 2; } 2>&1 \
        | tee reports/h100/block-placement-128t-98352B.txt ;;
    tc-profile)  # Nsight Compute's full set on the best TMA kernel (or $KERNEL): stall reasons per SASS line
      k=${KERNEL:-12_mma_tma_bf16:m256n128e}; tag=ncu-profile-${k/:/-}
      ncu --set full --import-source no --clock-control none -k hgemm_mma_sync -c 1 -f \
        -o "$OUT/$tag" python3 -m harness launch "$k" --size 4096 --repeats 1 \
        > "$OUT/tc-profile.log" 2>&1 || tail -20 "$OUT/tc-profile.log"
      { header "bash experiments/gpu_session.sh tc-profile (ncu --set full --clock-control none, $k" \
          "at 4096, one launch)"
        ncu -i "$OUT/$tag.ncu-rep" --page details; } > "reports/h100/$tag.txt" 2>&1
      ncu -i "$OUT/$tag.ncu-rep" --page source --print-source sass --csv 2>&1 \
        | gzip > "reports/h100/$tag-sass.csv.gz"
      head -c 3000 "reports/h100/$tag.txt" ;;
    energy)  # board power and energy per FLOP (a 2 s power pass after each timing: NVML's
      # power moves every ~100 ms): the power tests, the ceilings, the best kernels and cuBLAS
      # one at a time timed with warm L2 and with cold, then 12e's in-kernel clock and power
      python3 -m pytest -q -m gpu tests/test_ceiling.py tests/test_clocks.py 2>&1 \
        | tee "$OUT/pytest-power.log"
      python3 -m harness ceiling --power 2>&1 | tee "$OUT/ceiling.log"
      python3 -m harness run --hot --power 12_mma_tma_bf16:m256n128e \
        12_mma_tma_bf16:m128n128x2e 13_mma_persist_bf16:m256n128l3g8e \
        14_mma_cluster_bf16:m256n128e 12_mma_tma_fp16:m256n128e --size 4096 2>&1 \
        | tee "$OUT/run-hot.log"
      python3 -m harness run --power 12_mma_tma_bf16:m256n128e \
        13_mma_persist_bf16:m256n128l3g8e --size 4096 --size 8192 2>&1 | tee "$OUT/run-cold.log"
      python3 experiments/kernel_clock.py 12_mma_tma_bf16:m256n128e --size 4096 2>&1 \
        | tee "$OUT/kernel-clock.log" ;;
    energy-parts)  # 12e's energy per FLOP as built, without its C stores, without its copies
      # after the first stages, and without both: what each part costs under the power cap
      python3 -m pytest -q tests/test_tools.py 2>&1 | tail -2
      python3 -m harness energy 12_mma_tma_bf16:m256n128e --knob NOSTORE=1 \
        --knob NOLOAD=1 --knob NOLOAD=1,NOSTORE=1 --rounds 2 2>&1 | tee "$OUT/kernel-energy.log" ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  tar czf "$OUT/reports.tgz" reports   # after every step: a later timeout loses nothing
  tar czf "$OUT/new-reports.tgz" -C "$REP" .
done
