#pragma once
// The evaluation suite of a trained model, written into the experiment store
// under the result names of docs/STORE.md:
//   <set>/bleu|chrf|chrfpp (+ bootstrap CIs), <set>/by_length, <set>/comet,
//   contrastive/accuracy|by_pronoun|by_distance|by_phenomenon,
//   entities/recall|by_frequency, extrapolation/by_length, efficiency/*,
//   gates/mean|skipped|skip_threshold|by_layer (gated cross-attention),
//   alignment/aer|aer_all_layers|occlusion_aer|by_layer (attention and
//   occlusion against gold word alignments),
//   explain/<k>/occlusion|attention (heatmaps of a few short test sentences),
// and the hypotheses of every test set into <exp_dir>/hyp/<set>.txt.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "core/store.h"
#include "data/contrastive.h"
#include "models/model.h"
#include "results/contrastive.h"
#include "train/prepare.h"

namespace mambamt::train {

// What training measured (efficiency results).
struct TrainingFacts {
  double train_tokens_per_s = 0;  // NaN/0 = unknown
  double peak_memory_mb = 0;
  // The parameters evaluated (load_weights' description: "mean of steps 4000
  // 5000", a checkpoint's path); the test sets' evaluation records it as the
  // store's text `weights`.
  std::string weights;
};

struct EvalParts {
  bool test_sets = true;       // BLEU/chrF/by_length/COMET of every test set
  bool contrastive = true;     // eval.contrastive still applies
  bool entities = true;        // eval.entity_recall still applies
  bool extrapolation = true;   // eval.extrapolation still applies
  bool efficiency = true;
  bool explain = true;         // occlusion and attention maps of the first short test sentences
  bool gates = true;           // gated cross-attention's gate statistics on the first test set
  bool alignment = true;       // eval.alignment still applies
  // The parts on are all that changed since the store's evaluation version
  // (core::evaluation_parts_changed_since): when they ran to their end, the
  // store is as the whole suite of this version leaves it, and records it.
  bool brings_up_to_date = false;
  bool whole() const {
    return test_sets && contrastive && entities && extrapolation && efficiency && explain && gates && alignment;
  }
};

// Only the parts named (the names of the fields above); throws Error on
// another name.
EvalParts eval_parts_named(const std::set<std::string>& names);

// Runs the suite on `model` (already holding the parameters to evaluate) and
// records the results in `store` (committed at the end of each part). Gated
// cross-attention skips below eval.gate_skip throughout, and by what it did
// before when it returns (models::GateSkipGuard).
// `should_stop` is asked between parts and between the batches of a part's
// decoding and scoring (the checkpoint signal, SIGTERM): returns false when it
// stopped early, the store holding the parts committed before.
bool evaluate(models::TranslationModel& model, const core::ExperimentConfig& config, const PreparedData& data,
              const torch::Device& device, core::ExperimentStore& store, const std::string& exp_dir,
              const TrainingFacts& facts, const EvalParts& parts = {},
              const std::function<bool()>& should_stop = {});

// Forced-decoding scores of a contrastive set: the reference and its variants
// in the context the experiment was trained with (context_sentences - 1
// preceding sentences, as many as fit data.max_example_tokens; their
// translations as the target prefix, or none with data.context_side =
// source); only the tokens of the scored sentence count.
std::vector<results::ContrastiveScores> contrastive_scores(models::TranslationModel& model,
                                                           const core::ExperimentConfig& config,
                                                           const data::Tokenizer& tokenizer,
                                                           const std::vector<data::ContrastiveExample>& examples,
                                                           const torch::Device& device);

// The thresholds of gates/by_layer's below_<t> columns.
const std::vector<double>& gate_thresholds();

// The lower edges of eval.length_buckets' buckets: {1, b1+1, b2+1, ...}.
std::vector<int64_t> length_bucket_edges(const std::vector<int64_t>& upper_edges);

// COMET of one test set by the `comet-score` command of Unbabel's COMET
// with `model` (its --model; empty: its default model), run on the GPU when
// `gpu`, with its files in `work_dir` (removed after). `system` is NaN with `note` saying why when it
// cannot run or prints no system score; `segments` (one score per
// hypothesis) is empty when it did not print every segment's.
struct CometScores {
  double system = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> segments;
  std::string note;
};
CometScores comet_score(const std::vector<std::string>& sources, const std::vector<std::string>& hypotheses,
                        const std::vector<std::string>& references, const std::string& work_dir, bool gpu,
                        const std::string& model = "");

}  // namespace mambamt::train
