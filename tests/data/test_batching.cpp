// Token-budget batching: the budget holds with padding, padding stays small,
// tensors are right-padded and masked, and the decoder-only packing puts the
// loss on the target part only.
#include <catch2/catch.hpp>

#include <set>

#include "data/batching.h"
#include "data/detail/rng.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;
using Catch::Matchers::Contains;

namespace {

const SpecialIds kIds;

std::vector<Example> random_examples(size_t n, uint64_t seed, int max_len = 60) {
  mambamt::data::detail::Rng rng(seed);
  std::vector<Example> out(n);
  for (size_t i = 0; i < n; ++i) {
    const int s = static_cast<int>(rng.between(1, max_len));
    const int t = std::max(1, s + static_cast<int>(rng.between(-3, 3)));
    for (int k = 0; k < s; ++k) out[i].src.push_back(static_cast<int32_t>(10 + rng.below(100)));
    for (int k = 0; k < t; ++k) out[i].tgt.push_back(static_cast<int32_t>(10 + rng.below(100)));
    out[i].spans = {Span{static_cast<int32_t>(i), 0, 1}};
  }
  return out;
}

}  // namespace

TEST_CASE("batches respect the token budget, cover every example once, and pad little") {
  const auto ex = random_examples(5000, 1);
  for (int64_t budget : {256, 1024, 4096}) {
    BatchingOptions o;
    o.max_tokens = budget;
    BatchPlanStats st;
    const auto batches = plan_batches(ex, o, 3, &st);
    std::set<int64_t> seen;
    for (const auto& b : batches) {
      REQUIRE_FALSE(b.empty());
      CHECK(batch_cost(ex, b, o) <= budget);
      for (int64_t i : b) CHECK(seen.insert(i).second);
    }
    CHECK(seen.size() == ex.size());
    CHECK(st.examples == 5000);
    CHECK(st.batches == static_cast<int64_t>(batches.size()));
    INFO("budget " << budget << " padding " << st.padding_fraction());
    CHECK(st.padding_fraction() < 0.10);  // length bucketing
    // Unsorted batches of the same sizes would pad far more.
    BatchPlanStats naive_stats;
    std::vector<BatchIndices> naive;
    int64_t next = 0;
    for (const auto& b : batches) {
      BatchIndices nb;
      for (size_t k = 0; k < b.size(); ++k) nb.push_back(next++);
      naive.push_back(nb);
    }
    naive_stats = batch_stats(ex, naive, o);
    CHECK(naive_stats.padding_fraction() > 2 * st.padding_fraction());
  }
}

TEST_CASE("batch planning is seeded, and evaluation order is fixed") {
  const auto ex = random_examples(2000, 2);
  BatchingOptions o;
  o.max_tokens = 1024;
  CHECK(plan_batches(ex, o, 5) == plan_batches(ex, o, 5));
  CHECK(plan_batches(ex, o, 5) != plan_batches(ex, o, 6));
  o.shuffle = false;
  const auto fixed = plan_batches(ex, o, 5);
  CHECK(fixed == plan_batches(ex, o, 6));
  // Sorted by length: the padded length never decreases.
  int64_t prev = 0;
  for (const auto& b : fixed) {
    const int64_t len = batch_cost(ex, b, o) / static_cast<int64_t>(b.size());
    CHECK(len >= prev);
    prev = len;
  }
  o.max_batch_size = 7;
  for (const auto& b : plan_batches(ex, o)) CHECK(b.size() <= 7);
}

TEST_CASE("examples over the budget: error, own batch, or skipped") {
  auto ex = random_examples(50, 3, 20);
  ex[10].src.assign(300, 11);
  BatchingOptions o;
  o.max_tokens = 128;
  CHECK_THAT(input_error([&] { plan_batches(ex, o); }), Contains("301 tokens") && Contains("max_tokens = 128"));
  o.oversize = Oversize::kSingleton;
  bool alone = false;
  for (const auto& b : plan_batches(ex, o)) alone = alone || (b.size() == 1 && b[0] == 10);
  CHECK(alone);
  o.oversize = Oversize::kSkip;
  BatchPlanStats st;
  const auto batches = plan_batches(ex, o, 0, &st);
  CHECK(st.skipped == 1);
  CHECK(st.examples == 49);
}

TEST_CASE("collate: source + eos, bos + target, target + eos, right padding and masks") {
  std::vector<Example> ex(2);
  ex[0].src = {10, 11, 12};
  ex[0].tgt = {20, 21};
  ex[1].src = {13};
  ex[1].tgt = {22, 23, 24, 25};
  const Batch b = collate(ex, {0, 1}, kIds);
  REQUIRE(b.src.sizes() == torch::IntArrayRef({2, 4}));
  REQUIRE(b.tgt_in.sizes() == torch::IntArrayRef({2, 5}));
  CHECK(b.src.dtype() == torch::kLong);
  CHECK(b.src_mask.dtype() == torch::kBool);
  auto row = [](const torch::Tensor& t, int64_t r) {
    std::vector<int64_t> v(static_cast<size_t>(t.size(1)));
    for (int64_t j = 0; j < t.size(1); ++j) v[static_cast<size_t>(j)] = t[r][j].item<int64_t>();
    return v;
  };
  CHECK(row(b.src, 0) == std::vector<int64_t>{10, 11, 12, 3});
  CHECK(row(b.src, 1) == std::vector<int64_t>{13, 3, 0, 0});
  CHECK(row(b.src_mask.to(torch::kLong), 1) == std::vector<int64_t>{1, 1, 0, 0});
  CHECK(row(b.tgt_in, 0) == std::vector<int64_t>{2, 20, 21, 0, 0});
  CHECK(row(b.tgt_out, 0) == std::vector<int64_t>{20, 21, 3, 0, 0});
  CHECK(row(b.tgt_mask.to(torch::kLong), 0) == std::vector<int64_t>{1, 1, 1, 0, 0});
  CHECK(row(b.tgt_in, 1) == std::vector<int64_t>{2, 22, 23, 24, 25});
  CHECK(row(b.tgt_out, 1) == std::vector<int64_t>{22, 23, 24, 25, 3});
  CHECK(b.src_tokens == 6);
  CHECK(b.tgt_tokens == 8);
  CHECK(b.padding_fraction() == Approx(1.0 - 14.0 / 18.0));
  CHECK(b.example_ids == std::vector<int64_t>{0, 1});

  BatchingOptions tagged;
  tagged.source_prefix = 6;
  const Batch t = collate(ex, {1}, kIds, tagged);
  CHECK(row(t.src, 0) == std::vector<int64_t>{6, 13, 3});
}

TEST_CASE("decoder-only packing: source, boundary, target, loss on the target only") {
  std::vector<Example> ex(2);
  ex[0].src = {10, 11};
  ex[0].tgt = {20, 21, 22};
  ex[1].src = {12};
  ex[1].tgt = {23};
  BatchingOptions o;
  o.layout = Layout::kDecoderOnly;
  o.boundary = 5;
  const PackedBatch p = pack_decoder_only(ex, {0, 1}, kIds, o);
  // bos 10 11 <5> 20 21 22 eos: 8 tokens, input/target 7
  REQUIRE(p.input.sizes() == torch::IntArrayRef({2, 7}));
  auto row = [](const torch::Tensor& t, int64_t r) {
    std::vector<int64_t> v(static_cast<size_t>(t.size(1)));
    for (int64_t j = 0; j < t.size(1); ++j) v[static_cast<size_t>(j)] = t[r][j].to(torch::kLong).item<int64_t>();
    return v;
  };
  CHECK(row(p.input, 0) == std::vector<int64_t>{2, 10, 11, 5, 20, 21, 22});
  CHECK(row(p.target, 0) == std::vector<int64_t>{10, 11, 5, 20, 21, 22, 3});
  CHECK(row(p.loss_mask, 0) == std::vector<int64_t>{0, 0, 0, 1, 1, 1, 1});
  CHECK(row(p.mask, 0) == std::vector<int64_t>{1, 1, 1, 1, 1, 1, 1});
  CHECK(row(p.input, 1) == std::vector<int64_t>{2, 12, 5, 23, 0, 0, 0});
  CHECK(row(p.target, 1) == std::vector<int64_t>{12, 5, 23, 3, 0, 0, 0});
  CHECK(row(p.loss_mask, 1) == std::vector<int64_t>{0, 0, 1, 1, 0, 0, 0});
  CHECK(row(p.mask, 1) == std::vector<int64_t>{1, 1, 1, 1, 0, 0, 0});
  CHECK(p.src_len[0].item<int64_t>() == 4);
  // Its cost in planning is B * L.
  CHECK(batch_cost(ex, {0, 1}, o) == 2 * 7);
  // Without a boundary token, eos separates source and target.
  o.boundary = -1;
  CHECK(row(pack_decoder_only(ex, {1}, kIds, o).input, 0) == std::vector<int64_t>{2, 12, 3, 23});
}
