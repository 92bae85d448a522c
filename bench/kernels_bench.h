#pragma once
// `mambamt bench kernels`: the SSM kernels (Mamba-2 SSD scan, Mamba-1 selective
// scan) against the best pure-LibTorch formulation and the step-by-step
// reference, forward and forward+backward, on the CPU or a GPU, with LibTorch's
// own large-sgemm GFLOP/s and the copy bandwidth measured in the same run.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--lengths LIST] [--dstates LIST] [--threads N] [--repeat R]
// [--device cpu|cuda|auto] (kKernelsBenchHelp). Returns 0; throws UsageError on
// a bad argument.
int run_kernels_bench(const std::vector<std::string>& args, std::ostream& out);

// The help paragraph of the benchmark (for the registry).
extern const char* const kKernelsBenchHelp;

}  // namespace mambamt::bench
