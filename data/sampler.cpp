#include "data/sampler.h"

#include <algorithm>

#include "core/error.h"

namespace mambamt::data {

std::vector<int64_t> SamplerState::to_vector() const {
  return {epoch, position, static_cast<int64_t>(seed)};
}

SamplerState SamplerState::from_vector(const std::vector<int64_t>& v) {
  if (v.size() != 3 || v[0] < 0 || v[1] < 0) {
    throw InputError("sampler state: expected [epoch >= 0, position >= 0, seed], got " + std::to_string(v.size()) +
                     " values");
  }
  return SamplerState{v[0], v[1], static_cast<uint64_t>(v[2])};
}

EpochPlan plan_epoch(const std::vector<Example>& base, const CatNOptions& cat_n, const BatchingOptions& batching,
                     int32_t sep_id, uint64_t seed, int64_t epoch, int64_t world_size) {
  if (world_size < 1) throw InputError("data-parallel world size must be >= 1");
  EpochPlan p;
  p.epoch = epoch;
  p.examples = apply_cat_n(base, cat_n, sep_id, seed, epoch, &p.cat_n);
  // Seeds of the epochs are spaced so that plan_batches's stream differs per epoch.
  p.batches = plan_batches(p.examples, batching, seed * 1000003ULL + static_cast<uint64_t>(epoch), &p.stats);
  // Equal steps on every rank: split the largest batches in two until the
  // count is a multiple of world_size. Halves stay within the budget.
  while (p.batches.size() % static_cast<size_t>(world_size) != 0) {
    auto largest = std::max_element(p.batches.begin(), p.batches.end(),
                                    [](const BatchIndices& a, const BatchIndices& b) { return a.size() < b.size(); });
    if (largest == p.batches.end() || largest->size() < 2) {
      throw InputError("data: epoch " + std::to_string(epoch) + " has " + std::to_string(p.batches.size()) +
                       " batches of single examples, which cannot be shared evenly by " +
                       std::to_string(world_size) + " ranks (raise max_tokens or use fewer ranks)");
    }
    const auto half = static_cast<std::ptrdiff_t>(largest->size() / 2);
    BatchIndices second(largest->begin() + half, largest->end());
    largest->resize(static_cast<size_t>(half));
    p.batches.insert(largest + 1, std::move(second));
  }
  // Padding changes when batches split; recount (keeping the skipped count).
  const int64_t skipped = p.stats.skipped;
  p.stats = batch_stats(p.examples, p.batches, batching);
  p.stats.skipped = skipped;
  return p;
}

BatchSampler::BatchSampler(std::vector<Example> base, SpecialIds ids, CatNOptions cat_n, BatchingOptions batching,
                           SamplerOptions options)
    : base_(std::move(base)), ids_(ids), cat_n_(cat_n), batching_(batching), options_(options) {
  if (options_.world_size < 1 || options_.rank < 0 || options_.rank >= options_.world_size) {
    throw InputError("data-parallel rank " + std::to_string(options_.rank) + " is outside world size " +
                     std::to_string(options_.world_size));
  }
  if (base_.empty()) throw InputError("data: no training examples (all sentences longer than max_example_tokens?)");
  load_epoch(0);
}

void BatchSampler::load_epoch(int64_t epoch) {
  plan_ = plan_epoch(base_, cat_n_, batching_, ids_.sep, options_.seed, epoch, options_.world_size);
  position_ = 0;
}

int64_t BatchSampler::steps_per_epoch() const {
  return static_cast<int64_t>(plan_.batches.size()) / options_.world_size;
}

const BatchIndices& BatchSampler::next_indices() {
  if (position_ + options_.world_size > static_cast<int64_t>(plan_.batches.size())) load_epoch(plan_.epoch + 1);
  current_ = plan_.batches[static_cast<size_t>(position_ + options_.rank)];
  position_ += options_.world_size;
  return current_;
}

Batch BatchSampler::next() {
  const BatchIndices& b = next_indices();
  return collate(plan_.examples, b, ids_, batching_);
}

PackedBatch BatchSampler::next_packed() {
  const BatchIndices& b = next_indices();
  return pack_decoder_only(plan_.examples, b, ids_, batching_);
}

SamplerState BatchSampler::state() const { return SamplerState{plan_.epoch, position_, options_.seed}; }

void BatchSampler::restore(const SamplerState& s) {
  if (s.epoch < 0 || s.position < 0) throw InputError("sampler state: negative epoch or position");
  options_.seed = s.seed;
  load_epoch(s.epoch);
  if (s.position > static_cast<int64_t>(plan_.batches.size())) {
    throw InputError("sampler state: position " + std::to_string(s.position) + " is past the " +
                     std::to_string(plan_.batches.size()) + " batches of epoch " + std::to_string(s.epoch) +
                     " (was the data or the batching changed?)");
  }
  position_ = s.position;
}

}  // namespace mambamt::data
