#!/bin/bash
# The second GPU run of docs/gpu.md: steps without compute on 1, 2, 4 towers against the shipped
# h100 profile, then the TensorFlow tests (pytest -m tf). Same conventions as gpu_checks.sh.
set -u
OUT=${OUT:-/tmp/gpu-out}; BUDGET=${BUDGET:-400}; START=$(date +%s)
exec > >(tee -a "$OUT/log.txt") 2>&1
export SIMSYNC_CACHE_DIR=/tmp/simsync-cache PYTHONUNBUFFERED=1
check() {
  local name=$1 limit=$2 began; shift 2; began=$(date +%s)
  echo "=== $name (limit ${limit}s, at $(( began - START ))s): $*"
  timeout -k 5 "$limit" "$@"; echo "=== $name: exit $? after $(( $(date +%s) - began ))s"
}
date -u; nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
check empty-steps 100 python -P bench/gpu/empty_steps.py h100
LEFT=$(( BUDGET - ($(date +%s) - START) - 5 )); [ $LEFT -lt 30 ] && LEFT=30
check pytest-tf $LEFT python -P -m pytest -m tf -n 8 --timeout 200 -p no:cacheprovider -q -rfE tests
echo "=== all done after $(( $(date +%s) - START ))s"
