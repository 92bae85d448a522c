#include "bench/bench.h"

#include "bench/data_bench.h"
#include "bench/decode_bench.h"
#include "bench/kernels_bench.h"
#include "bench/orchestrator_bench.h"
#include "bench/train_bench.h"

namespace mambamt::bench {

const std::vector<Benchmark>& all() {
  // One line per benchmark; each lives in bench/<name>_bench.cpp.
  static const std::vector<Benchmark> list = {
      {"data", kDataBenchHelp, run_data_bench},
      {"decode", kDecodeBenchHelp, run_decode_bench},
      {"kernels", kKernelsBenchHelp, run_kernels_bench},
      {"orchestrator", kOrchestratorBenchHelp, run_orchestrator_bench},
      {"train", kTrainBenchHelp, run_train_bench},
  };
  return list;
}

}  // namespace mambamt::bench
