// The resumable sharded sampler: resuming mid-epoch continues the same order,
// shards are disjoint and cover the epoch, and every rank takes the same
// number of steps.
#include <catch2/catch.hpp>

#include <set>

#include "data/detail/rng.h"
#include "data/sampler.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;

namespace {

const SpecialIds kIds;

std::vector<Example> base_examples(size_t n) {
  mambamt::data::detail::Rng rng(11);
  std::vector<Example> out(n);
  for (size_t i = 0; i < n; ++i) {
    out[i].src.assign(static_cast<size_t>(rng.between(3, 30)), static_cast<int32_t>(10 + i % 50));
    out[i].tgt.assign(static_cast<size_t>(rng.between(3, 30)), static_cast<int32_t>(60 + i % 50));
    out[i].spans = {Span{static_cast<int32_t>(i), 0, 1}};
  }
  return out;
}

BatchingOptions batching() {
  BatchingOptions o;
  o.max_tokens = 400;
  return o;
}

CatNOptions cat5() {
  CatNOptions o;
  o.n = 5;
  o.max_tokens = 200;
  return o;
}

// The example spans of a batch: identity of its content across epochs' lists.
std::vector<int32_t> content(const BatchSampler& s, const BatchIndices& b) {
  std::vector<int32_t> out;
  for (int64_t i : b)
    for (const auto& sp : s.examples()[static_cast<size_t>(i)].spans) out.push_back(sp.doc);
  return out;
}

}  // namespace

TEST_CASE("a sampler resumed mid-epoch gives the same batches as one never stopped") {
  const auto base = base_examples(3000);
  SamplerOptions so;
  so.seed = 42;
  BatchSampler straight(base, kIds, cat5(), batching(), so);
  const int64_t steps = straight.steps_per_epoch();
  REQUIRE(steps > 20);
  std::vector<std::vector<int32_t>> expected;
  for (int64_t i = 0; i < 2 * steps + 10; ++i) expected.push_back(content(straight, straight.next_indices()));

  for (int64_t stop : {int64_t{0}, int64_t{7}, steps - 1, steps, steps + 3}) {
    BatchSampler first(base, kIds, cat5(), batching(), so);
    for (int64_t i = 0; i < stop; ++i) first.next_indices();
    // The state travels as three integers (a checkpoint).
    const std::vector<int64_t> saved = first.state().to_vector();
    REQUIRE(saved.size() == 3);
    SamplerOptions other_seed = so;
    other_seed.seed = 7;  // restored from the state, not from the options
    BatchSampler resumed(base, kIds, cat5(), batching(), other_seed);
    resumed.restore(SamplerState::from_vector(saved));
    for (int64_t i = stop; i < static_cast<int64_t>(expected.size()); ++i) {
      INFO("stopped after " << stop << ", step " << i);
      REQUIRE(content(resumed, resumed.next_indices()) == expected[static_cast<size_t>(i)]);
    }
  }
}

TEST_CASE("epochs differ, and the tensors match the indices") {
  const auto base = base_examples(500);
  BatchSampler s(base, kIds, cat5(), batching(), SamplerOptions{});
  const auto first = content(s, s.next_indices());
  for (int64_t i = 1; i < s.steps_per_epoch(); ++i) s.next_indices();
  CHECK(s.state().position == static_cast<int64_t>(s.plan().batches.size()));
  const auto next_epoch = content(s, s.next_indices());
  CHECK(s.state().epoch == 1);
  CHECK(first != next_epoch);
  const Batch b = s.next();
  CHECK(b.size() == static_cast<int64_t>(b.example_ids.size()));
  CHECK(b.src.size(0) * std::max(b.src.size(1), b.tgt_out.size(1)) <= 400);
  CHECK(b.src[0][s.examples()[static_cast<size_t>(b.example_ids[0])].src_len() - 1].item<int64_t>() == kIds.eos);
}

TEST_CASE("shards are disjoint, cover the epoch, and give every rank the same steps") {
  const auto base = base_examples(2000);
  for (int64_t world : {1, 2, 3, 4, 7}) {
    std::vector<std::set<int64_t>> shard(static_cast<size_t>(world));
    std::vector<int64_t> steps(static_cast<size_t>(world));
    int64_t epoch_examples = 0;
    for (int64_t r = 0; r < world; ++r) {
      SamplerOptions so;
      so.seed = 3;
      so.rank = r;
      so.world_size = world;
      BatchSampler s(base, kIds, cat5(), batching(), so);
      steps[static_cast<size_t>(r)] = s.steps_per_epoch();
      epoch_examples = static_cast<int64_t>(s.examples().size());
      CHECK(static_cast<int64_t>(s.plan().batches.size()) == world * s.steps_per_epoch());
      for (int64_t k = 0; k < s.steps_per_epoch(); ++k) {
        const auto& b = s.next_indices();
        CHECK(batch_cost(s.examples(), b, batching()) <= 400);
        for (int64_t i : b) shard[static_cast<size_t>(r)].insert(i);
      }
      CHECK(s.state().epoch == 0);
    }
    std::set<int64_t> all;
    size_t total = 0;
    for (const auto& sh : shard) {
      total += sh.size();
      all.insert(sh.begin(), sh.end());
      CHECK(steps[0] == steps[&sh - &shard[0]]);
    }
    INFO("world size " << world);
    CHECK(total == all.size());                              // disjoint
    CHECK(static_cast<int64_t>(all.size()) == epoch_examples);  // covering
  }
}

TEST_CASE("sampler state errors") {
  CHECK_THROWS_AS(SamplerState::from_vector({1, 2}), mambamt::InputError);
  CHECK_THROWS_AS(SamplerState::from_vector({-1, 0, 3}), mambamt::InputError);
  const auto base = base_examples(100);
  BatchSampler s(base, kIds, CatNOptions{}, batching(), SamplerOptions{});
  CHECK_THROWS_AS(s.restore(SamplerState{0, 1000000, 1}), mambamt::InputError);
  SamplerOptions bad;
  bad.rank = 2;
  bad.world_size = 2;
  CHECK_THROWS_AS(BatchSampler(base, kIds, CatNOptions{}, batching(), bad), mambamt::InputError);
}
