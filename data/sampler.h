#pragma once
// The training batch stream: a deterministic, resumable sampler that shards
// batches across data-parallel ranks.
//
// Epoch e is a pure function of (base examples, options, seed, e): CAT-N is
// redrawn (apply_cat_n with the epoch), the examples are planned into
// token-budget batches (plan_batches seeded by seed and e), and the batch list
// is made a multiple of world_size by halving the largest batches (so every
// rank takes the same number of steps and nothing is dropped or repeated).
// Round k of the epoch gives rank r the batch at index k * world_size + r: the
// shards are disjoint and together cover every example of the epoch.
//
// The state is three integers (epoch, position, seed); position is the index
// of the next round's first batch in the epoch's list, the same on every rank,
// so a state saved by any rank resumes all of them exactly. (Resuming with
// another world size continues from the same point of that epoch, but its
// batch list is re-balanced for the new size.)
#include <cstdint>
#include <vector>

#include "data/batching.h"
#include "data/examples.h"

namespace mambamt::data {

struct SamplerOptions {
  // Seed of CAT-N draws, tie-breaking and batch order.
  uint64_t seed = 1;
  // This process's data-parallel rank and the number of ranks.
  int64_t rank = 0;
  int64_t world_size = 1;
};

struct SamplerState {
  int64_t epoch = 0;
  int64_t position = 0;  // index of the next round's first batch in the epoch
  uint64_t seed = 0;

  // As integers for a checkpoint, and back (InputError on a malformed vector).
  std::vector<int64_t> to_vector() const;
  static SamplerState from_vector(const std::vector<int64_t>& v);
  bool operator==(const SamplerState& o) const {
    return epoch == o.epoch && position == o.position && seed == o.seed;
  }
};

// The examples and global batch order of one epoch.
struct EpochPlan {
  int64_t epoch = 0;
  std::vector<Example> examples;      // after CAT-N
  std::vector<BatchIndices> batches;  // global order; size a multiple of world_size
  BatchPlanStats stats;
  CatNStats cat_n;
};

EpochPlan plan_epoch(const std::vector<Example>& base, const CatNOptions& cat_n, const BatchingOptions& batching,
                     int32_t sep_id, uint64_t seed, int64_t epoch, int64_t world_size);

class BatchSampler {
 public:
  BatchSampler(std::vector<Example> base, SpecialIds ids, CatNOptions cat_n, BatchingOptions batching,
               SamplerOptions options);

  // This rank's next batch; after the last round of an epoch the next epoch
  // starts. Each call is one step: every rank calls it the same number of times.
  const BatchIndices& next_indices();
  Batch next();               // encoder-decoder tensors of next_indices()
  PackedBatch next_packed();  // decoder-only tensors of next_indices()

  // The examples the indices refer to (those of the current epoch).
  const std::vector<Example>& examples() const { return plan_.examples; }
  const EpochPlan& plan() const { return plan_; }
  // Rounds (steps per rank) in the current epoch.
  int64_t steps_per_epoch() const;

  SamplerState state() const;
  // Continues from a saved state (recomputes that epoch's plan).
  void restore(const SamplerState& state);

 private:
  void load_epoch(int64_t epoch);

  std::vector<Example> base_;
  SpecialIds ids_;
  CatNOptions cat_n_;
  BatchingOptions batching_;
  SamplerOptions options_;
  EpochPlan plan_;
  int64_t position_ = 0;
  BatchIndices current_;
};

}  // namespace mambamt::data
