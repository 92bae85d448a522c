#!/usr/bin/env bash
# The README's main job: installs what is missing, builds the mambamt binary
# (the tests are scripts/test.sh's), runs the demo sweep
# (configs/demo.toml: 8 small models on the synthetic corpus, one MPI rank per
# core) and the collector, and prints the results table. Idempotent: a second
# run finds every experiment completed and only collects again.
#   GRID=configs/other.toml RANKS=4 scripts/demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh --target mambamt

BIN=${BUILD_DIR:-build}/bin/mambamt
GRID=${GRID:-configs/demo.toml}
RANKS=${RANKS:-$(nproc)}
# The run directory the grid names (sweep.output_dir/sweep.name; the dry run
# prints "run directory DIR", with " (new)" before the first run).
RUN_DIR=$("$BIN" sweep "$GRID" --dry-run | sed -n 's/^run directory \(.*\)$/\1/p' | sed 's/ (new)$//')

if [ "$(id -u)" -eq 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
# A run directory of an earlier version of the demo grid takes its new points
# (its completed experiments are kept); any other grid must match its own.
GRID_CHANGE=""
if [ "$GRID" = configs/demo.toml ]; then GRID_CHANGE=--allow-grid-change; fi
echo "demo: sweep $GRID on $RANKS rank(s) into $RUN_DIR"
start=$(date +%s)
rc=0
if [ "$RANKS" -gt 1 ]; then
  # Ranks that wait for the coordinator yield their core instead of spinning.
  OMPI_MCA_mpi_yield_when_idle=1 mpirun --oversubscribe -np "$RANKS" "$BIN" sweep "$GRID" $GRID_CHANGE || rc=$?
else
  "$BIN" sweep "$GRID" $GRID_CHANGE || rc=$?
fi
echo "demo: sweep finished in $(( $(date +%s) - start )) s (exit code $rc)"
"$BIN" status "$RUN_DIR"
# The collector writes beside runs/: results/<sweep>/report.md, tables, plots.
OUT="$(dirname "$(dirname "$RUN_DIR")")/results/$(basename "$RUN_DIR")"
"$BIN" collect "$RUN_DIR" --format md,csv,tex,json --out "$OUT"
echo
# The baseline comparison: every model of the sweep against the Transformer.
awk '/^## /{show = /[Bb]aseline/} show' "$OUT/tables.md"
echo "demo: report at $OUT/report.md"
exit "$rc"
