#pragma once
// A trained experiment loaded from its directory: config from the store,
// tokenizer and parameters from the checkpoints (best.h5, or the newest step,
// or the mean of the last eval.average_last steps), and translation of raw
// text with it (`mambamt translate`).
#include <torch/torch.h>

#include <optional>
#include <string>
#include <vector>

#include "core/checkpoint.h"
#include "core/config.h"
#include "data/tokenizer.h"
#include "models/model.h"
#include "models/search.h"

namespace mambamt::train {

// Which parameters to load.
enum class Weights {
  kDefault,  // average of the last eval.average_last checkpoints when > 0, else best.h5, else the newest step
  kBest,     // best.h5 (the newest step when there is none)
  kLatest,   // the newest step
};

struct LoadedExperiment {
  core::ExperimentConfig config;
  std::string exp_dir;
  std::string shared_dir;  // where its corpus and tokenizer were prepared
  std::optional<data::Tokenizer> tokenizer;
  models::ModelPtr model;  // on `device`, in eval mode
  torch::Device device = torch::kCPU;
  std::string weights;     // which checkpoint(s) the parameters come from, for messages
};

// The model of a checkpoint's config ("model/..." tensors loaded), built for `vocab_size`.
models::ModelPtr build_for_checkpoint(const core::ExperimentConfig& config, int64_t vocab_size,
                                      const core::Checkpoint& ckpt);

// Loads the parameters chosen by `which` into `model` (the averaging reads k
// files); returns their description. Throws InputError when ckpt_dir has no
// checkpoint.
std::string load_weights(models::TranslationModel& model, const std::string& ckpt_dir, Weights which,
                         int64_t average_last);

// Reads <exp_dir>/store.h5 and its checkpoints. Throws InputError naming the
// directory when there is no store or no checkpoint. `local_rank` picks the
// GPU among several (core::select_device).
LoadedExperiment load_experiment(const std::string& exp_dir, const std::string& device = "auto",
                                 Weights which = Weights::kDefault, int local_rank = 0);

// Translates lines (one sentence or passage each; sentences of a passage may
// be separated by " <sep> " to mark document structure) with the experiment's
// beam search. Empty lines give empty translations. An experiment that
// translates in context (translates_in_context: eval.doc_decode = "sentences"
// on windows) reads one sentence per line and a blank line between documents,
// and translates each sentence after its document's preceding ones, as its
// evaluation does.
std::vector<std::string> translate_lines(const LoadedExperiment& exp, const std::vector<std::string>& lines);

// The n-best lists of lines translated whole (as translate_lines does for an
// experiment that does not translate in context): per line, up to
// search_options(exp.config.eval, ...).nbest translations, best first, with
// their hypotheses (scores); an empty line gets none. Throws InputError for an
// experiment that translates in context.
struct ScoredTranslation {
  std::string text;
  models::Hypothesis hypothesis;
};
std::vector<std::vector<ScoredTranslation>> translate_lines_nbest(const LoadedExperiment& exp,
                                                                   const std::vector<std::string>& lines);

}  // namespace mambamt::train
