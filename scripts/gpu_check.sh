#!/usr/bin/env bash
# Run ON THE GPU MACHINE, in one call of the device tool, with the Debian
# packages that scripts/gpu_deps.sh downloaded here:
#
#   run(command="scripts/gpu_check.sh", carry=[".deps"], timeout_s=570)
#
# Builds mambamt and the kernel and model tests against the machine's PyTorch
# (scripts/gpu_build.sh), then, in order of importance and while its time
# budget lasts: the [cuda] tests (kernels against the float64 references; the
# models' logits, gradients and incremental decoding against the CPU, steps
# replayed from CUDA graphs against the usual ones), `mambamt bench decode
# --device cuda` without and with --graphs, `mambamt bench kernels --device
# cuda --quick` (the SSM kernels against LibTorch's forms and their floor),
# bench decode `--graphs --bf16` (as evaluation runs), `mambamt bench
# train` (small preset), the demo sweep trained and evaluated on the GPU, and
# one of its experiments evaluated again, eagerly and with
# MAMBAMT_CUDA_GRAPHS=1. Logs go to $OUT/gpu_logs.tar.gz (what the device
# tool brings back) or gpu-out/. On an H200 the build took ~100 s, the tests
# and both bench decode runs ~30 s, the demo sweep 120-160 s: the whole check
# ~300 s.
#   GPU_CHECK_SECONDS=540   stop starting stages after this many seconds
#   BENCH_ARGS="..."        extra arguments of bench decode
#   GPU_CHECK_TARGETS="mambamt"   build these only (default: mambamt test_kernels test_models)
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
# The device tool brings back at most 8 files from $OUT: with it, the logs are
# written to a scratch folder and packed into $OUT/gpu_logs.tar.gz at the end.
if [ -n "${OUT:-}" ]; then
  LOGS=$(mktemp -d)
  trap 'tar czf "$OUT/gpu_logs.tar.gz" -C "$LOGS" .' EXIT
else
  LOGS=gpu-out
fi
mkdir -p "$LOGS"
BUDGET=${GPU_CHECK_SECONDS:-540}
BUILD_DIR=${BUILD_DIR:-build-gpu}
export BUILD_DIR
t0=$(date +%s)
elapsed() { echo $(($(date +%s) - t0)); }
left() { echo $((BUDGET - $(elapsed))); }
stage() { echo; echo "=== $1 (at $(elapsed) s)"; }
status=0

stage "machine"
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm,clocks.max.mem --format=csv | tee "$LOGS/gpu.txt"
echo "cores $(nproc); $(g++ --version | head -1); $(nvcc --version | tail -1)"
python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'

stage "build"
MAMBAMT_GPU_TARGETS=${GPU_CHECK_TARGETS:-mambamt test_kernels test_models} scripts/gpu_build.sh >"$LOGS/build.log" 2>&1
rc=$?
grep -E -A6 "error:|FAILED:|CMake Error" "$LOGS/build.log" | head -80
tail -3 "$LOGS/build.log"
echo "build exit code $rc after $(elapsed) s; compiler warnings: $(grep -c "warning:" "$LOGS/build.log")" \
  "($(grep -c "Winvalid-pch" "$LOGS/build.log") of them a rejected precompiled header)"
[ "$rc" -eq 0 ] || status=1
[ -f "$BUILD_DIR/gpu_env.sh" ] && . "$BUILD_DIR/gpu_env.sh"
BIN=$BUILD_DIR/bin/mambamt
# Every shared library the programs need that the machine lacks, all at once.
for f in "$BIN" "$BUILD_DIR"/tests/test_*; do
  [ -x "$f" ] && ldd "$f" | grep "not found" | sed "s#^#$f: #"
done

for t in test_kernels test_models; do
  stage "$t [cuda]"
  if [ ! -x "$BUILD_DIR/tests/$t" ]; then echo "not built"; status=1; continue; fi
  if [ "$(left)" -lt 60 ]; then echo "skipped: out of time"; status=1; continue; fi
  timeout "$(($(left) - 30))" "$BUILD_DIR/tests/$t" "[cuda]" >"$LOGS/$t-cuda.log" 2>&1 || status=1
  grep -E -B2 -A12 "FAILED|REQUIRE|CHECK\(|error|Error" "$LOGS/$t-cuda.log" | head -60
  tail -4 "$LOGS/$t-cuda.log"
  # The test cases return early (a warning) without a device: that is no pass.
  if grep -q "no CUDA device" "$LOGS/$t-cuda.log"; then echo "$t saw no CUDA device: its [cuda] tests did not run"; status=1; fi
done

stage "bench decode --device cuda"
if [ -x "$BIN" ] && [ "$(left)" -gt 90 ]; then
  # shellcheck disable=SC2086
  timeout "$(($(left) - 60))" "$BIN" bench decode --device cuda ${BENCH_ARGS:-} 2>&1 | tee "$LOGS/bench_decode.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "skipped"; status=1
fi

stage "bench decode --device cuda --graphs (steps replayed from CUDA graphs)"
if [ -x "$BIN" ] && [ "$(left)" -gt 90 ]; then
  # shellcheck disable=SC2086
  timeout "$(($(left) - 60))" "$BIN" bench decode --device cuda --graphs ${BENCH_ARGS:-} 2>&1 |
    tee "$LOGS/bench_decode_graphs.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "skipped"; status=1
fi

stage "bench kernels --device cuda --quick (SSD at L=4096 and 1024, Mamba-1 at 1024)"
if [ -x "$BIN" ] && [ "$(left)" -gt 180 ]; then
  timeout 90 "$BIN" bench kernels --device cuda --quick 2>&1 | tee "$LOGS/bench_kernels.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "skipped"; status=1
fi

stage "bench decode --device cuda --graphs --bf16 (as evaluation runs: autocast, cached bf16 weights)"
if [ -x "$BIN" ] && [ "$(left)" -gt 240 ]; then
  # shellcheck disable=SC2086
  timeout 90 "$BIN" bench decode --device cuda --graphs --bf16 ${BENCH_ARGS:-} 2>&1 | tee "$LOGS/bench_decode_graphs_bf16.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
else
  echo "skipped"
fi

stage "bench train (on the GPU when one is visible)"
if [ -x "$BIN" ] && [ "$(left)" -gt 150 ]; then
  timeout 90 "$BIN" bench train --preset small --lengths 512,2048,8192 2>&1 | tee "$LOGS/bench_train.txt"
else
  echo "skipped"
fi

stage "demo sweep on the GPU"
if [ -x "$BIN" ] && [ "$(left)" -gt 45 ]; then
  RUN_DIR=$("$BIN" sweep configs/demo.toml --dry-run | sed -n 's/^run directory \(.*\)$/\1/p' | sed 's/ (new)$//')
  timeout "$(($(left) - 20))" "$BIN" sweep configs/demo.toml >"$LOGS/sweep.log" 2>&1
  echo "sweep exit code $? after $(elapsed) s"
  tail -5 "$LOGS/sweep.log"
  "$BIN" status "$RUN_DIR" 2>&1 | tail -15
  "$BIN" collect "$RUN_DIR" --format md --out /tmp/demo-results >/dev/null 2>&1 &&
    cp /tmp/demo-results/tables.md "$LOGS/demo_tables.md" &&
    awk '/^## /{show = /[Bb]aseline/} show' /tmp/demo-results/tables.md
else
  echo "skipped"
fi
stage "eval of a demo experiment: eager, then MAMBAMT_CUDA_GRAPHS=1"
EXP=$(ls -d "${RUN_DIR:-/nonexistent}"/exp/*/ 2>/dev/null | head -1)
if [ -x "$BIN" ] && [ -n "$EXP" ] && [ "$(left)" -gt 40 ]; then
  for g in 0 1; do
    s=$(date +%s%N)
    MAMBAMT_CUDA_GRAPHS=$g timeout "$(($(left) / 2))" "$BIN" eval --store "$EXP" >"$LOGS/eval_graphs$g.log" 2>&1
    rc=$?
    echo "MAMBAMT_CUDA_GRAPHS=$g: exit $rc after $((($(date +%s%N) - s) / 1000000)) ms"
    [ "$rc" -eq 0 ] || { status=1; tail -5 "$LOGS/eval_graphs$g.log"; }
    grep -E "BLEU|chrF|contrastive" "$LOGS/eval_graphs$g.log" | head -5
  done
else
  echo "skipped"
fi
echo "gpu_check: done after $(elapsed) s, status $status"
exit $status
