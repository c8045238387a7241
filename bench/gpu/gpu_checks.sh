#!/bin/bash
# The GPU checks of docs/gpu.md, in one run on a GPU machine (issue 25). From a folder holding
# this repository's tests/, examples/ and bench/, with simsync and TensorFlow installed (on a
# machine without TensorFlow: ../shared/gpu/run.sh bash bench/gpu/gpu_checks.sh). Each check
# has a time limit; what they print goes to $OUT/log.txt, what they write to $OUT/results.tar
# (refreshed after each). BUDGET: seconds for all of it (the tests get what is left).
set -u
OUT=${OUT:-/tmp/gpu-out}; R=/tmp/gpu-results; mkdir -p "$OUT" "$R"
BUDGET=${BUDGET:-540}; START=$(date +%s)
exec > >(tee -a "$OUT/log.txt") 2>&1
export SIMSYNC_CACHE_DIR=/tmp/simsync-cache PYTHONUNBUFFERED=1
pack() { tar -cf "$OUT/results.tmp" -C "$R" . && mv "$OUT/results.tmp" "$OUT/results.tar"; }
check() {  # NAME SECONDS COMMAND...: run it with a limit, say how it ended and how long it took
  local name=$1 limit=$2 began; shift 2; began=$(date +%s)
  echo "=== $name (limit ${limit}s, at $(( began - START ))s): $*"
  timeout -k 5 "$limit" "$@"; echo "=== $name: exit $? after $(( $(date +%s) - began ))s"; pack
}
py() { python -P "$@"; }  # -P: simsync from the installed package, never a source folder
date -u; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv; nproc
py -c "import tensorflow as tf, simsync; print('TensorFlow', tf.__version__, tf.config.list_physical_devices('GPU'), simsync.__file__)"
sed -e 's/^devices = 4 .*/devices = 1/' -e 's/^speeds = .*/speeds = [1]/' -e 's/^name = .*/name = "one-tower"/' \
  examples/four_towers.toml > "$R/one_tower.toml"
sed -e 's/^devices = 4 .*/devices = 2/' -e 's/^speeds = .*/speeds = [1, 0.5]/' -e 's/^name = .*/name = "two-towers"/' \
  examples/four_towers.toml > "$R/two_towers.toml"
check fixture 90 python -P tests/fixtures/gpu/capture_step_stats.py "$R/gpu_step_stats.json"
check calibrate 180 python -P -m simsync calibrate examples/four_towers.toml -o "$R/h100.json"
check one-tower 120 sh -c "python -P -m simsync crosscheck $R/one_tower.toml --costs $R/h100.json --json --trace $R/one_tower_trace.json > $R/one_tower.json"
check four-towers 150 sh -c "python -P -m simsync crosscheck examples/four_towers.toml --costs $R/h100.json --json --trace $R/four_towers_trace.json > $R/four_towers.json"
check backup-worker 180 sh -c "python -P -m simsync crosscheck examples/backup_worker.toml --steps 20 --open-ports --json > $R/backup_worker.json"
check two-towers 90 sh -c "python -P -m simsync crosscheck $R/two_towers.toml --costs $R/h100.json --json > $R/two_towers.json"
LEFT=$(( BUDGET - ($(date +%s) - START) - 10 )); [ $LEFT -lt 30 ] && LEFT=30
check pytest-tf $LEFT python -P -m pytest -m tf -n 8 --timeout 240 -p no:cacheprovider -q -rfE tests
for f in "$R"/*.json; do case $f in *trace*|*step_stats*) ;; *) echo "--- $f"; head -c 3000 "$f"; echo;; esac; done
echo "=== all done after $(( $(date +%s) - START ))s"
