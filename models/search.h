#pragma once
// Decoding on top of TranslationModel's start()/step(): greedy and batched
// beam search, and forced-decoding scores (contrastive evaluation). Every
// function switches the model to eval() for its duration and restores the mode.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "models/model.h"

namespace mambamt::models {

struct SearchOptions {
  // Beam size (1 = greedy search).
  int64_t beam_size = 4;
  // Hypotheses returned per source (<= beam_size; greedy returns one).
  int64_t nbest = 1;
  // Finished hypotheses rank by log_prob / length^length_penalty, where length
  // counts the generated tokens and the eos.
  double length_penalty = 1.0;
  // Longest output per source: floor(max_len_a * source length + max_len_b)
  // tokens, the eos included (at least 1); source length counts real tokens.
  double max_len_a = 1.5;
  int64_t max_len_b = 10;
  // A hard cap on that whatever the source (0 = none).
  int64_t max_length = 0;
  // The eos is not allowed before this many tokens (benchmarks set it to the
  // maximum to force an output length).
  int64_t min_length = 0;
  // Drop the rows of finished sources from the batch as they finish (less
  // work); false keeps the batch whole until every source is done.
  bool compact = true;
  // Forced prefixes of different lengths: true feeds each row's whole prefix in
  // one prefill where the model kind can (TranslationModel::prefills_ragged);
  // false (and kinds that cannot) prefill the part of the shortest and feed
  // the rest one step at a time. The hypotheses are the same.
  bool prefill_prefixes = true;
  // Decode a static state (InferenceState::make_static: tensors changed in
  // place, shapes fixed) where the model kind can; the hypotheses are the
  // same up to float rounding.
  bool static_steps = false;
  // On a GPU, replay every step from CUDA graphs (models/graph.h) where the
  // kind can: static steps without compaction (a smaller batch would be
  // recorded again). Ignored on the CPU. train::search_options sets it from
  // MAMBAMT_CUDA_GRAPHS=1.
  bool cuda_graphs = false;
};

struct Hypothesis {
  std::vector<int64_t> tokens;  // generated tokens without bos and the final eos
  double log_prob = 0.0;        // sum of token log-probabilities (the eos included when finished)
  double score = 0.0;           // log_prob / length^length_penalty
  bool finished = false;        // ended with eos (false: cut at the maximum length)
};

// Best first; at most nbest entries.
using NBest = std::vector<Hypothesis>;

// Forced target prefixes: empty, or one token list per row of src (after the
// bos; an empty list forces nothing). A row's prefix is fed before anything
// is generated; its tokens are neither returned in Hypothesis::tokens nor
// scored, and lengths (the maximum, min_length, the length penalty) count
// from its end. Document-level models translate a sentence after their own
// translations of the sentences before it this way.
using Prefixes = std::vector<std::vector<int64_t>>;

// Greedy search's choice at one step: the highest-scoring token of each row
// of logits (R,V), the first on ties (as logits.argmax(1), on greedy search's
// CPU fast path).
torch::Tensor greedy_tokens(const torch::Tensor& logits);

// Greedy search: one hypothesis per row of src (B,S) / src_mask (B,S).
std::vector<Hypothesis> greedy_search(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                                      const SearchOptions& options, const Prefixes& prefixes = {});

// Batched beam search: beam_size hypotheses per source, a source is done when
// beam_size hypotheses have ended with eos (or at its maximum length). With
// beam_size 1 it returns greedy_search's hypotheses.
std::vector<NBest> beam_search(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                               const SearchOptions& options, const Prefixes& prefixes = {});

// greedy_search when beam_size == 1, else beam_search.
std::vector<NBest> translate(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                             const SearchOptions& options, const Prefixes& prefixes = {});

// Forced decoding: log p(tgt_out[b,t] | src, tgt_in[b,:t+1]) as (B,T) float32,
// 0 at padding (tgt_mask false). The batch layout of model.h plus tgt_out.
torch::Tensor token_log_probs(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                              const torch::Tensor& tgt_in, const torch::Tensor& tgt_out, const torch::Tensor& tgt_mask);

// log p(target | source) per row (B) float64: the sum of token_log_probs.
torch::Tensor sequence_log_probs(TranslationModel& model, const torch::Tensor& src, const torch::Tensor& src_mask,
                                 const torch::Tensor& tgt_in, const torch::Tensor& tgt_out,
                                 const torch::Tensor& tgt_mask);

// Puts a module in eval mode for a scope and restores its mode after.
class EvalModeGuard {
 public:
  explicit EvalModeGuard(torch::nn::Module& m) : m_(m), was_training_(m.is_training()) { m_.eval(); }
  ~EvalModeGuard() {
    if (was_training_) m_.train();
  }
  EvalModeGuard(const EvalModeGuard&) = delete;
  EvalModeGuard& operator=(const EvalModeGuard&) = delete;

 private:
  torch::nn::Module& m_;
  bool was_training_;
};

}  // namespace mambamt::models
