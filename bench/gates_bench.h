#pragma once
// `mambamt bench gates`: what skipping gated cross-attention where its gate is
// nearly closed (eval.gate_skip) saves in a CPU decode step: one
// cross-attention layer with a share of its rows closed, and a whole hybrid
// with every gated layer closed, against the same step without skipping
// measured in the same rounds, next to the ratio its bytes predict.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--preset P] [--batch N] [--src N,N] [--out N] [--rounds R]
//       [--threads N]. Returns 0; throws UsageError on a bad argument.
int run_gates_bench(const std::vector<std::string>& args, std::ostream& out);

extern const char* const kGatesBenchHelp;

}  // namespace mambamt::bench
