#pragma once
// Token-budget batching: examples of similar length go together (padding stays
// small), every batch stays within max_tokens counting padding, and batches
// become LibTorch tensors right-padded with the pad id.
//
// Encoder-decoder layout, per example of source s_1..s_n and target t_1..t_m:
//   src      s_1 .. s_n eos          (B, S)   S = longest src_len in the batch
//   tgt_in   bos t_1 .. t_m          (B, T)   T = longest tgt_len
//   tgt_out  t_1 .. t_m eos          (B, T)
// cost = B * max(S, T).
//
// Decoder-only layout (pack_decoder_only): one sequence
//   bos s_1 .. s_n B t_1 .. t_m eos  with B = options.boundary (default eos)
// input = sequence[:-1], target = sequence[1:], loss only where the target is
// t_1 .. t_m or the final eos. cost = B * L, L = n + m + 2.
#include <torch/torch.h>

#include <cstdint>
#include <vector>

#include "data/examples.h"
#include "data/tokenizer.h"

namespace mambamt::data {

enum class Layout {
  kEncoderDecoder,  // collate()
  kDecoderOnly,     // pack_decoder_only()
};

enum class Oversize {
  kThrow,      // InputError naming the example's length and the budget
  kSingleton,  // its own batch, over the budget (evaluation: never lose an example)
  kSkip,       // left out (counted in BatchPlanStats::skipped)
};

struct BatchingOptions {
  // Most tokens per batch, padding included (see the cost above).
  int64_t max_tokens = 4096;
  // Most examples per batch (0 = no limit).
  int64_t max_batch_size = 0;
  // Random order among examples of equal length and random batch order
  // (training); false keeps a fixed order sorted by length (evaluation).
  bool shuffle = true;
  Layout layout = Layout::kEncoderDecoder;
  // Examples longer than max_tokens on their own.
  Oversize oversize = Oversize::kThrow;
  // A token put before every source (e.g. Tokenizer::language_id of the target
  // language for multilingual models); -1 = none. Counted in the lengths.
  int32_t source_prefix = -1;
  // Decoder-only: the token between source and target (-1 = eos).
  int32_t boundary = -1;
};

// Example indices of one batch.
using BatchIndices = std::vector<int64_t>;

struct BatchPlanStats {
  int64_t batches = 0;
  int64_t examples = 0;
  int64_t skipped = 0;         // Oversize::kSkip
  int64_t real_tokens = 0;     // tokens of the examples (source + target sides)
  int64_t padded_tokens = 0;   // real tokens plus padding
  double padding_fraction() const {
    return padded_tokens > 0 ? 1.0 - static_cast<double>(real_tokens) / static_cast<double>(padded_tokens) : 0.0;
  }
};

// Groups examples into batches: sorts by length (ties broken at random when
// shuffling, with `seed`), fills each batch greedily up to the budget, then
// shuffles the batch order (when shuffling). Every example lands in exactly
// one batch (except skipped ones).
std::vector<BatchIndices> plan_batches(const std::vector<Example>& examples, const BatchingOptions& options,
                                       uint64_t seed = 0, BatchPlanStats* stats = nullptr);

// Statistics of a given list of batches (real and padded tokens).
BatchPlanStats batch_stats(const std::vector<Example>& examples, const std::vector<BatchIndices>& batches,
                           const BatchingOptions& options);

// The cost of a batch of these examples under `options` (B * padded length).
int64_t batch_cost(const std::vector<Example>& examples, const BatchIndices& batch, const BatchingOptions& options);

struct Batch {
  torch::Tensor src;       // (B, S) int64, source ids + eos, pad to the right
  torch::Tensor src_mask;  // (B, S) bool, true at real tokens
  torch::Tensor tgt_in;    // (B, T) int64, bos + target
  torch::Tensor tgt_out;   // (B, T) int64, target + eos (the labels)
  torch::Tensor tgt_mask;  // (B, T) bool, true at real tokens
  std::vector<int64_t> example_ids;  // index of each row in the example list
  int64_t src_tokens = 0;  // real tokens in src
  int64_t tgt_tokens = 0;  // real tokens in tgt_out
  int64_t size() const { return static_cast<int64_t>(example_ids.size()); }
  // Share of padding among the src and tgt_out positions.
  double padding_fraction() const;
};

Batch collate(const std::vector<Example>& examples, const BatchIndices& batch, const SpecialIds& ids,
              const BatchingOptions& options = {});

struct PackedBatch {
  torch::Tensor input;      // (B, L) int64: the sequence without its last token
  torch::Tensor target;     // (B, L) int64: the sequence shifted by one (labels)
  torch::Tensor mask;       // (B, L) bool, true at real (non-pad) positions
  torch::Tensor loss_mask;  // (B, L) bool, true where target is a target-side token or the final eos
  torch::Tensor src_len;    // (B,) int64: prefix length before the target starts (bos + source + boundary)
  std::vector<int64_t> example_ids;
  int64_t size() const { return static_cast<int64_t>(example_ids.size()); }
};

PackedBatch pack_decoder_only(const std::vector<Example>& examples, const BatchIndices& batch,
                              const SpecialIds& ids, const BatchingOptions& options = {});

}  // namespace mambamt::data
