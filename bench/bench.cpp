#include "bench/bench.h"

#include "bench/data_bench.h"

namespace mambamt::bench {

const std::vector<Benchmark>& all() {
  // One line per benchmark; each lives in bench/<name>_bench.cpp.
  static const std::vector<Benchmark> list = {
      {"data", kDataBenchHelp, run_data_bench},
  };
  return list;
}

}  // namespace mambamt::bench
