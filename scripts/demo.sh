#!/usr/bin/env bash
# The main job, end to end: fetch lab02 into a temporary workspace, grade the untouched
# stub (every check fails), then grade the reference solution (every check passes).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
# the grading daemon `labkit grade` leaves behind lives in the demo's folder, and goes with it
export LABKIT_RUNTIME_DIR="$work/run"
trap 'labkit daemon stop >/dev/null; rm -rf "$work"' EXIT

labkit fetch lab02 --dir "$work/lab02"
echo
echo "== Grading the untouched stub =="
labkit grade lab02 --dir "$work/lab02" || echo "(exit code $?: checks fail, as they should for a stub)"
echo
echo "== Grading the reference solution =="
cp "$repo/solutions/lab02/broadcasting.py" "$work/lab02/broadcasting.py"
labkit grade lab02 --dir "$work/lab02"
