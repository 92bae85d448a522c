#pragma once
// Decoding and forced-decoding scores over lists of examples, in token-budget
// batches (the pieces evaluation, validation and `mambamt translate` share).
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/config.h"
#include "data/examples.h"
#include "data/tokenizer.h"
#include "models/model.h"
#include "models/search.h"

namespace mambamt::train {

// A stop request honoured between batches: while a StopScope is open on this
// thread, the batch loops of the evaluation's decoding and scoring
// (translate_examples*, score_pairs) call check_stop(), which throws Stopped
// once the scope's function says so. evaluate() opens one with its
// should_stop, so a signal ends a long part (a test set's decoding, a
// contrastive set) within a batch instead of at its end. Outside a scope
// check_stop() does nothing.
struct Stopped {};  // not a std::exception: no handler reports it as a failure

class StopScope {
 public:
  explicit StopScope(std::function<bool()> should_stop);
  ~StopScope();
  StopScope(const StopScope&) = delete;
  StopScope& operator=(const StopScope&) = delete;

 private:
  std::function<bool()> should_stop_;
  const std::function<bool()>* outer_;
};

void check_stop();

// The searches of an experiment's evaluation: its [eval] settings with
// `beam_size` (n-best lists of eval.nbest hypotheses, at most beam_size); on
// a GPU the steps are replayed from CUDA graphs when the environment has
// MAMBAMT_CUDA_GRAPHS=1 (a switch outside the config: it changes speed, not
// results, so it stays out of the experiment's identity).
// Any value but empty, 0 or 1 is an InputError naming the variable.
models::SearchOptions search_options(const core::EvalConfig& eval, int64_t beam_size);

struct DecodeStats {
  int64_t generated_tokens = 0;  // tokens produced (eos included)
  double seconds = 0;            // wall time of the searches
};

// Translates every example (sources only) and returns the n-best list of each
// (search.nbest hypotheses at most, best first), in input order. Batches hold
// at most batch_tokens source tokens. `prefixes`, when given, holds a forced
// target prefix per example (models::Prefixes: not returned, not scored).
std::vector<models::NBest> translate_examples_nbest(models::TranslationModel& model,
                                                   const std::vector<data::Example>& examples,
                                                   const data::SpecialIds& ids, const models::SearchOptions& search,
                                                   int64_t batch_tokens, const torch::Device& device,
                                                   bool bf16 = false, DecodeStats* stats = nullptr,
                                                   const models::Prefixes* prefixes = nullptr);

// Translates every example (sources only) and returns the hypothesis token
// ids of each, in input order. Batches hold at most batch_tokens source tokens.
// `prefixes`, when given, holds a forced target prefix per example
// (models::Prefixes: not returned, not scored).
std::vector<std::vector<int64_t>> translate_examples(models::TranslationModel& model,
                                                     const std::vector<data::Example>& examples,
                                                     const data::SpecialIds& ids, const models::SearchOptions& search,
                                                     int64_t batch_tokens, const torch::Device& device,
                                                     bool bf16 = false, DecodeStats* stats = nullptr,
                                                     const models::Prefixes* prefixes = nullptr);

// Document-level translation one sentence at a time (eval.doc_decode =
// "sentences"): `examples` are single sentences of `corpus` (Example::spans
// names each one). Every document with an example is translated from its first
// sentence on, in order; a sentence's source is preceded by up to `context`
// source sentences before it (joined by <sep>), and the model's own
// translations of those sentences, each followed by <sep>, are forced as the
// target prefix. Context sentences are taken newest first while the source
// and the prefix plus the sentence's own source length (a stand-in for its
// translation) stay within max_tokens. A translation ends at the eos or at a
// <sep> the model emits (what follows would be another sentence). Returns the
// translation of each example, in input order.
std::vector<std::vector<int64_t>> translate_in_context(models::TranslationModel& model,
                                                       const data::TokenizedCorpus& corpus,
                                                       const std::vector<data::Example>& examples, int64_t context,
                                                       int64_t max_tokens, const data::SpecialIds& ids,
                                                       const models::SearchOptions& search, int64_t batch_tokens,
                                                       const torch::Device& device, bool bf16 = false,
                                                       DecodeStats* stats = nullptr);

// The sentences of hypothesis ids, split at <sep>: one more than the
// separators, an empty one where two meet or one ends the output.
std::vector<std::string> hypothesis_sentences(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids);

// The text of hypothesis ids: its non-empty sentences joined by a space.
std::string hypothesis_text(const data::Tokenizer& tokenizer, const std::vector<int64_t>& ids);

// One line of an n-best list: "<index> ||| <text> ||| <score> ||| <log_prob>"
// (index: the input's 0-based line; score: log_prob / length^length_penalty,
// by which the list is ranked; log_prob: the summed token log-probabilities).
std::string nbest_line(size_t index, const std::string& text, const models::Hypothesis& h);

// Teacher-forced negative log-likelihood summed over target tokens, and the
// token count, of `examples` (batched by max_tokens; ranks take batches
// round-robin: rank r of n scores batches r, r+n, ...).
struct NllSum {
  double nll = 0;
  int64_t tokens = 0;
};
NllSum teacher_forced_nll(models::TranslationModel& model, const std::vector<data::Example>& examples,
                          const data::SpecialIds& ids, int64_t max_tokens, const torch::Device& device, bool bf16,
                          int rank = 0, int world = 1);

// The gates of gated cross-attention in a teacher-forced pass over `examples`
// (their targets forced), under the modules' current skip_below: one entry
// per gated module, in module order, with the gate of every real target
// token. Empty for models without one. Batched by max_tokens.
struct GateValues {
  std::string layer;          // e.g. "decoder.3.cross" (decoder layer 3)
  std::vector<float> values;  // every target token of every example
};
std::vector<GateValues> cross_gate_values(models::TranslationModel& model, const std::vector<data::Example>& examples,
                                          const data::SpecialIds& ids, int64_t max_tokens,
                                          const torch::Device& device, bool bf16);

// Log-probabilities of (source, target) pairs summed over the target tokens at
// positions >= score_from[i] (the tokens of the last sentence; earlier target
// tokens are a forced prefix). Batched by max_tokens.
std::vector<double> score_pairs(models::TranslationModel& model, const std::vector<data::Example>& pairs,
                                const std::vector<int64_t>& score_from, const data::SpecialIds& ids,
                                int64_t max_tokens, const torch::Device& device, bool bf16);

// Moves a batch's tensors to `device`.
void to_device(torch::Tensor& t, const torch::Device& device);

}  // namespace mambamt::train
