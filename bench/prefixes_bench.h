#pragma once
// `mambamt bench prefixes`: beam search after forced target prefixes of
// different lengths (how document-level models translate a sentence after
// their own translations of the sentences before it), each row's prefix fed
// in one prefill against the baseline measured in the same run: the shortest
// prefix prefilled and the rest of every row fed one step per token.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--preset P] [--batch N] [--beam K] [--src N]
//       [--prefixes MIN,MAX] [--out N] [--rounds R] [--threads N]. Prints a
// row per model. Returns 0; throws UsageError on a bad argument.
int run_prefixes_bench(const std::vector<std::string>& args, std::ostream& out);

extern const char* const kPrefixesBenchHelp;

}  // namespace mambamt::bench
