#!/usr/bin/env bash
# One GPU session on a registry-less host (see README): install the carried wheels, then run
# the tests and the given harness steps, copying logs and reports under $OUT.
# Usage: bash tools/gpu_session.sh STEP...   steps: tests, run, ceiling, sweep, sass, ncu
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
  --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
{ nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit \
    --format=csv; python3 -c 'import cuda.bindings, numpy; print("cuda-bindings",
    cuda.bindings.__version__, "numpy", numpy.__version__)'; } 2>&1 | tee "$OUT/env.txt"
for step in "$@"; do
  case "$step" in
    tests) python3 -m pytest -q --durations=15 2>&1 | tee "$OUT/pytest.log" ;;
    run) python3 -m harness run --size 1024 --size 2048 --size 4096 2>&1 | tee "$OUT/run.log" ;;
    ceiling) python3 -m harness ceiling 2>&1 | tee "$OUT/ceiling.log" ;;
    sweep) python3 -m harness occupancy --sweep 2>&1 | tee "$OUT/sweep.log" ;;
    sass) python3 -m harness sass 2>&1 | tee "$OUT/sass.txt" ;;
    ncu)
      for k in 03_smem_tiled:t32; do
        ncu --clock-control none --cache-control all --metrics gpu__time_duration.sum --csv \
          python3 tools/ncu_timing.py launch "$k" --size 4096 > "$OUT/ncu-${k/:/-}.csv" \
          2> "$OUT/ncu.err" || tail -20 "$OUT/ncu.err"
        run_json=$(ls -t reports/h100/run-*.json | head -1)
        python3 tools/ncu_timing.py compare "$OUT/ncu-${k/:/-}.csv" "$run_json" "$k" --size 4096
      done ;;
    *) echo "unknown step $step"; exit 2 ;;
  esac
  tar czf "$OUT/reports.tgz" reports   # after every step: a later timeout loses nothing
done
