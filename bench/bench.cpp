#include "bench/bench.h"

#include "bench/data_bench.h"
#include "bench/decode_bench.h"
#include "bench/kernels_bench.h"
#include "bench/orchestrator_bench.h"
#include "bench/prefixes_bench.h"
#include "bench/train_bench.h"

#include <cstdlib>
#include <sstream>

#include "core/error.h"

namespace mambamt::bench {

std::vector<int64_t> parse_list(const std::vector<std::string>& args, size_t& i, const std::string& who,
                                const std::string& option) {
  if (i + 1 >= args.size()) throw UsageError(who + ": " + option + " needs a value");
  std::vector<int64_t> out;
  std::stringstream ss(args[++i]);
  for (std::string item; std::getline(ss, item, ',');) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != 0 || v < 1)
      throw UsageError(who + ": " + option + " takes positive integers separated by commas, got '" + args[i] + "'");
    out.push_back(v);
  }
  if (out.empty()) throw UsageError(who + ": " + option + " is empty");
  return out;
}

const std::vector<Benchmark>& all() {
  // One line per benchmark; each lives in bench/<name>_bench.cpp.
  static const std::vector<Benchmark> list = {
      {"data", kDataBenchHelp, run_data_bench},
      {"decode", kDecodeBenchHelp, run_decode_bench},
      {"kernels", kKernelsBenchHelp, run_kernels_bench},
      {"orchestrator", kOrchestratorBenchHelp, run_orchestrator_bench},
      {"prefixes", kPrefixesBenchHelp, run_prefixes_bench},
      {"train", kTrainBenchHelp, run_train_bench},
  };
  return list;
}

}  // namespace mambamt::bench
