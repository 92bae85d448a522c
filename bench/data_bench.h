#pragma once
// `mambamt bench data`: tokenisation + batching throughput on one core against
// sentencepiece's own per-sentence encoding, measured in the same run.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--docs N] [--type bpe|unigram] [--vocab N] [--max-tokens N]
//       [--cat-n N] [--repeat R]. Returns 0; throws UsageError on a bad argument.
int run_data_bench(const std::vector<std::string>& args, std::ostream& out);

// The help paragraph of the benchmark (for the registry).
extern const char* const kDataBenchHelp;

}  // namespace mambamt::bench
