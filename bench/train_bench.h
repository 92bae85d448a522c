#pragma once
// `mambamt bench train`: training throughput (tokens/s) and peak memory of the
// hybrid (1:7, attention middle+end) against the Transformer of the same size
// preset on one document of 512, 2048 and 8192 source and target tokens (one
// run; ratios hybrid / Transformer).
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--preset P] [--lengths 512,2048,8192] [--steps N] [--threads N].
// Returns 0; throws UsageError on a bad argument.
int run_train_bench(const std::vector<std::string>& args, std::ostream& out);

extern const char* const kTrainBenchHelp;

}  // namespace mambamt::bench
