#!/usr/bin/env bash
# Submits a sweep and its collector, chained: the collector starts when the
# sweep job has ended, however it ended (--dependency=afterany), requeues included.
#
#   jobs/submit_sweep.sh [--no-prepare] GRID [RUN_DIR] [-- SBATCH OPTIONS FOR THE SWEEP]
#   jobs/submit_sweep.sh configs/ablation.toml -- --time=12:00:00 --nodes=2
#
# RUN_DIR defaults to <sweep.output_dir>/<sweep.name> read from the grid's
# [sweep] table (defaults: runs / the grid file's stem), the sweep's run directory.
# First, where the binary is found here as the batch script finds it
# ($MAMBAMT_BIN, mambamt on PATH, ./build/bin/mambamt), `mambamt prepare GRID`
# makes the grid's corpora and tokenizers and reads every data file: when a
# data setup fails, nothing is submitted (exit 1). --no-prepare skips it.
# Prints "sweep <job id>" and "collect <job id>".
set -euo pipefail
jobs_dir=$(cd "$(dirname "$0")" && pwd)

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
fi
prepare=1
if [ "$1" = --no-prepare ]; then
  prepare=0
  shift
  [ $# -ge 1 ] || { echo "submit_sweep.sh: no grid file given" >&2; exit 2; }
fi
grid=$1
shift
run_dir=""
if [ $# -gt 0 ] && [ "$1" != -- ]; then
  run_dir=$1
  shift
fi
[ "${1:-}" = -- ] && shift
if [ ! -f "$grid" ]; then
  echo "submit_sweep.sh: grid file '$grid' not found" >&2
  exit 2
fi

# A string value of the [sweep] table: key = "value" (plain TOML basic strings only).
sweep_value() {
  awk -v key="$1" '
    /^[ \t]*\[/ { in_sweep = ($0 ~ /^[ \t]*\[sweep\][ \t]*(#.*)?$/); next }
    in_sweep && $0 ~ "^[ \t]*" key "[ \t]*=" {
      sub(/^[^=]*=[ \t]*"/, ""); sub(/".*$/, ""); print; exit
    }' "$grid"
}
if [ -z "$run_dir" ]; then
  name=$(sweep_value name)
  [ -n "$name" ] || name=$(basename "$grid" .toml)
  out=$(sweep_value output_dir)
  run_dir=${out:-runs}/$name
fi

if [ "$prepare" = 1 ]; then
  bin=${MAMBAMT_BIN:-$(command -v mambamt || echo ./build/bin/mambamt)}
  if [ -x "$bin" ]; then
    if ! "$bin" prepare "$grid"; then
      echo "submit_sweep.sh: mambamt prepare failed for $grid: nothing submitted (fix the data above, or" \
        "submit with --no-prepare to let those points fail on the cluster)" >&2
      exit 1
    fi
  else
    echo "submit_sweep.sh: no mambamt binary here ($bin): the workers prepare the data at their start" >&2
  fi
fi

sweep=$(sbatch --parsable "$@" "$jobs_dir/ablation_grid.slurm" "$grid")
sweep=${sweep%%;*}  # "id;cluster" on multi-cluster sites
collect=$(sbatch --parsable --dependency=afterany:"$sweep" "$jobs_dir/collect.slurm" "$run_dir")
collect=${collect%%;*}
echo "sweep $sweep"
echo "collect $collect"
