#pragma once
// `mambamt bench decode`: greedy decoding speed and decoder-state memory of the
// hybrid (1:7, middle+end), the pure Mamba and the Transformer of the same size
// preset, as ratios to the Transformer measured in the same run, next to the
// ratios predicted by the bytes each model reads per step at the copy
// bandwidth measured in the same run, and beside them the roofline ratios:
// the same bytes, with each step's weight products taking at least their
// multiply-adds at the rate measured for the steps' own weight product.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: [--quick] [--preset P] [--batch 1,16] [--lengths 256,1024,4096]
//       [--src N] [--window W] [--full] [--threads N]. Prints each row as it is
// measured. Returns 0; throws UsageError on a bad argument.
int run_decode_bench(const std::vector<std::string>& args, std::ostream& out);

extern const char* const kDecodeBenchHelp;

}  // namespace mambamt::bench
