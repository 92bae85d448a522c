#include "bench/bench.h"

namespace mambamt::bench {

const std::vector<Benchmark>& all() {
  // One line per benchmark; each lives in bench/<name>_bench.cpp.
  static const std::vector<Benchmark> list = {
  };
  return list;
}

}  // namespace mambamt::bench
