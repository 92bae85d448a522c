#!/usr/bin/env bash
# Submits a sweep and its collector, chained: the collector starts when the
# sweep job has ended, however it ended (--dependency=afterany), requeues included.
#
#   jobs/submit_sweep.sh GRID [RUN_DIR] [-- SBATCH OPTIONS FOR THE SWEEP]
#   jobs/submit_sweep.sh configs/ablation.toml -- --time=12:00:00 --nodes=2
#
# RUN_DIR defaults to <sweep.output_dir>/<sweep.name> read from the grid's
# [sweep] table (defaults: runs / the grid file's stem), the sweep's run directory.
# Prints "sweep <job id>" and "collect <job id>".
set -euo pipefail
jobs_dir=$(cd "$(dirname "$0")" && pwd)

if [ $# -lt 1 ] || [ "$1" = -h ] || [ "$1" = --help ]; then
  sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
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

sweep=$(sbatch --parsable "$@" "$jobs_dir/ablation_grid.slurm" "$grid")
sweep=${sweep%%;*}  # "id;cluster" on multi-cluster sites
collect=$(sbatch --parsable --dependency=afterany:"$sweep" "$jobs_dir/collect.slurm" "$run_dir")
collect=${collect%%;*}
echo "sweep $sweep"
echo "collect $collect"
