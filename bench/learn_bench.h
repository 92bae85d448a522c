#pragma once
// `mambamt bench learn`: how well the models learn, against a reference
// implementation. Trains mambamt's Transformer (and the other kinds asked
// for) and a plain PyTorch Transformer (bench/learn/reference.py, Debian's
// python3-torch) of the same size on the same real parallel corpus, with the
// same sentencepiece model, token budget, optimiser, schedule and updates;
// greedy-decodes the same test set and scores every system with one scorer
// (sacreBLEU-compatible BLEU and chrF, results/). Prints test BLEU, chrF,
// train loss at a few updates, parameters and wall time, one row a system.
#include <ostream>
#include <string>
#include <vector>

namespace mambamt::bench {

// args: --corpus DIR [--out DIR] [--steps N] [--kinds LIST] [--no-reference]
// [--python PATH] [--threads N] [--init standard|normal] [--log-every N].
// Returns 0 when every system trained and was scored, 1 otherwise; throws
// UsageError on a bad argument.
int run_learn_bench(const std::vector<std::string>& args, std::ostream& out);

extern const char* const kLearnBenchHelp;

}  // namespace mambamt::bench
