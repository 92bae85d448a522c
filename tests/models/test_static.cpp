// Static decoding steps (InferenceState::make_static): what a CUDA graph of a
// step records (models/graph.h). Here on the CPU: they give the teacher-forced
// logits at the spans the graph runner picks, change every tensor of the state
// in place, and follow the usual steps after prefills and reorders. The graphs
// themselves run in test_cuda.cpp.
#include <catch2/catch.hpp>

#include <ATen/record_function.h>

#include <mutex>
#include <set>
#include <string>

#include "core/error.h"
#include "model_helpers.h"
#include "models/graph.h"
#include "models/search.h"
#include "skip.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

// One static step at the span the graph runner picks.
torch::Tensor static_step(TranslationModel& m, InferenceState& st, const torch::Tensor& tokens) {
  st.span = next_static_span(st);
  return m.step(st, tokens);
}

std::vector<const void*> addresses(const InferenceState& st) {
  std::vector<const void*> out;
  for (const torch::Tensor& t : st.tensors()) out.push_back(t.data_ptr());
  return out;
}

}  // namespace

TEST_CASE("static_span: multiples of 64, of an eighth of the power of two past 1024, within the capacity",
          "[models][static]") {
  CHECK(static_span(0, 5000) == 64);
  CHECK(static_span(63, 5000) == 64);
  CHECK(static_span(64, 5000) == 128);
  CHECK(static_span(200, 5000) == 256);
  CHECK(static_span(600, 5000) == 640);    // 601 columns: multiples of 64
  CHECK(static_span(1024, 5000) == 1152);  // 1025: multiples of 128
  CHECK(static_span(4095, 5000) == 4096);
  CHECK(static_span(4096, 5000) == 4608);
  CHECK(static_span(600, 610) == 610);
  // Never more than 64 columns or an eighth past what the step needs.
  for (int64_t c = 0; c < 9000; ++c) {
    const int64_t s = static_span(c, 1 << 20);
    REQUIRE(s > c);
    REQUIRE(s - (c + 1) <= std::max<int64_t>(63, (c + 1) / 8));
  }
}

TEST_CASE("static steps give the teacher-forced logits and keep every tensor of the state in place",
          "[models][static]") {
  // Targets past the first span (64) and the ring of 16.
  TestBatch batch = make_batch({9, 20}, {80, 45}, kVocab, 8);
  for (const KindVariant& v : static_step_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      REQUIRE(m->steps_statically());
      torch::NoGradGuard no_grad;
      torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      // The caches must hold the whole output: they do not grow.
      InferenceState st = m->start(batch.src, batch.src_mask, /*reserve=*/80);
      st.make_static();
      REQUIRE(st.is_static());
      const std::vector<const void*> before = addresses(st);
      std::set<int64_t> spans;
      double worst = 0;
      for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
        torch::Tensor step = static_step(*m, st, batch.tgt_in.select(1, t));
        spans.insert(st.span);
        torch::Tensor real = batch.tgt_mask.select(1, t);
        worst = std::max(worst, rel_err(step.index({real}), forced.select(1, t).index({real})));
        INFO("position " << t);
        REQUIRE(addresses(st) == before);
      }
      CHECK(worst <= 1e-4);
      // The device-side column and the host-side lengths agree.
      for (const LayerState& l : st.layers)
        if (l.self.k.defined()) CHECK(st.column.item<int64_t>() == l.self.length);
      // Full attention went through two spans (64, then 128 up to the capacity).
      if (full_attention(st)) CHECK(spans.size() == 2);
    }
  }
}

TEST_CASE("static steps follow the usual ones after a ragged prefill and through reorders, in place at the same batch",
          "[models][static]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  torch::manual_seed(6);
  torch::Tensor prefix = torch::randint(5, kVocab, {3, 6}, torch::kLong);
  prefix.select(1, 0).fill_(2);  // bos
  const torch::Tensor lengths = torch::tensor({4, 1, 6}, torch::kLong);
  const torch::Tensor next = torch::randint(5, kVocab, {8, 3}, torch::kLong);
  const torch::Tensor order = torch::tensor({2, 2, 0}, torch::kLong);
  for (const KindVariant& v : static_step_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      torch::NoGradGuard no_grad;
      InferenceState usual = m->prefill(batch.src, batch.src_mask, prefix, /*reserve=*/20, lengths);
      InferenceState fixed = m->prefill(batch.src, batch.src_mask, prefix, /*reserve=*/20, lengths);
      fixed.make_static();
      for (int64_t i = 0; i < next.size(0); ++i) {
        INFO("step " << i);
        if (i == 4) {  // beam search's reorder: rows repeated and dropped
          const std::vector<const void*> before = addresses(fixed);
          usual.reorder(order);
          fixed.reorder(order);
          CHECK(fixed.is_static());
          // The same batch: the rows copied back into the same tensors.
          CHECK(addresses(fixed) == before);
        }
        if (i == 6) {  // another batch: new tensors, still static
          const torch::Tensor grow = torch::tensor({0, 1, 2, 2}, torch::kLong);
          usual.reorder(grow);
          fixed.reorder(grow);
          CHECK(fixed.is_static());
          CHECK(fixed.batch_size() == 4);
        }
        const torch::Tensor tokens = i >= 6 ? torch::cat({next[i], next[i].narrow(0, 2, 1)}) : next[i];
        torch::Tensor want = m->step(usual, tokens);
        CHECK(rel_err(static_step(*m, fixed, tokens), want) <= 1e-4);
        CHECK(torch::equal(fixed.position, usual.position));
      }
    }
  }
}

namespace {

// The names of the LibTorch ops run (nested ones included, on any thread)
// while `f` runs.
template <typename F>
std::set<std::string> ops_run(F&& f) {
  static std::mutex mutex;
  static std::set<std::string>* seen = nullptr;
  std::set<std::string> names;
  seen = &names;
  const at::CallbackHandle handle = at::addGlobalCallback(
      at::RecordFunctionCallback([](const at::RecordFunction& fn) -> std::unique_ptr<at::ObserverContext> {
        const std::lock_guard<std::mutex> lock(mutex);
        if (seen) seen->insert(fn.name());
        return nullptr;
      }).scopes({at::RecordScope::FUNCTION}));
  try {
    f();
  } catch (...) {
    at::removeCallback(handle);
    seen = nullptr;
    throw;
  }
  at::removeCallback(handle);
  seen = nullptr;
  return names;
}

// Ops that wait for the device and read a value back to the host: a CUDA graph
// cannot record them (the capture fails with "operation not permitted when
// stream is capturing").
const std::set<std::string> kHostReads = {
    "aten::item",     "aten::_local_scalar_dense", "aten::nonzero", "aten::masked_select", "aten::equal",
    "aten::is_nonzero", "aten::allclose", "aten::unique",  "aten::_unique",      "aten::_unique2",
    "aten::unique_consecutive", "aten::unique_dim"};

}  // namespace

// The graph runner records a static step as it is; on the CPU the ops it runs
// can be listed, and none of them may read a value back (what the GPU's step
// shares with the CPU's: everything but the kernels' and norms' own branches).
TEST_CASE("a static step reads no value back to the host, as a CUDA graph needs", "[models][static]") {
  TestBatch batch = make_batch({9, 20}, {6, 4});
  // The check itself sees such a read.
  CHECK(ops_run([&] { (void)batch.src.sum().item<int64_t>(); }).count("aten::_local_scalar_dense") == 1);
  for (const KindVariant& v : static_step_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      torch::NoGradGuard no_grad;
      InferenceState st = m->start(batch.src, batch.src_mask, /*reserve=*/80);
      st.make_static();
      static_step(*m, st, batch.tgt_in.select(1, 0));  // anything made once, at the first step
      std::set<std::string> ops = ops_run([&] {
        for (int64_t t = 1; t < 4; ++t) static_step(*m, st, batch.tgt_in.select(1, t));
      });
      CHECK(ops.size() > 5);
      for (const std::string& op : ops) {
        INFO("op " << op);
        CHECK(kHostReads.count(op) == 0);
      }
    }
  }
}

TEST_CASE("a static step refuses a span that misses its column or leaves the cache", "[models][static]") {
  TestBatch batch = make_batch({5, 3}, {6, 4});
  ModelPtr m = tiny_model(tiny_config("transformer"));
  torch::NoGradGuard no_grad;
  InferenceState st = m->start(batch.src, batch.src_mask, /*reserve=*/20);
  st.make_static();
  st.span = 1;
  m->step(st, batch.tgt_in.select(1, 0));  // column 0, span 1
  // Column 1 is outside a span of 1, and 21 columns are more than the cache holds.
  CHECK_THROWS_WITH(m->step(st, batch.tgt_in.select(1, 1)), Catch::Contains("needs a span in (1, 20]"));
  st.span = 21;
  CHECK_THROWS_WITH(m->step(st, batch.tgt_in.select(1, 1)), Catch::Contains("got 21"));
  // Stepped to the cache's end, there is no next span.
  for (int64_t t = 1; t < 20; ++t) static_step(*m, st, batch.tgt_in.select(1, 1));
  CHECK_THROWS_WITH(next_static_span(st), Catch::Contains("the KV caches are full (20 columns)"));
}

TEST_CASE("step graphs need a kind that steps statically, a GPU and a LibTorch with CUDA", "[models][static]") {
  TestBatch batch = make_batch({5, 3}, {6, 4});
  ModelPtr rnn = tiny_model(tiny_config("rnnsearch"));
  CHECK_FALSE(rnn->steps_statically());
  if (StepGraphs::available()) MAMBAMT_SKIP("a GPU is visible: the refusals without one are not checked");
  ModelPtr m = tiny_model(tiny_config("mamba"));
  InferenceState st = m->start(batch.src, batch.src_mask);
  CHECK_THROWS_AS(StepGraphs(*m, st), Error);
  // Nothing was changed on the way.
  CHECK_FALSE(st.is_static());
}

// SearchOptions::static_steps: greedy and beam search over static states (what
// the CUDA graphs replay) find the usual hypotheses, with and without
// compaction, after ragged forced prefixes too.
TEST_CASE("searches over static states find the usual hypotheses", "[models][static][search]") {
  const TestBatch batch = make_batch({5, 3, 7}, {2, 2, 2});
  const Prefixes prefixes = {{7, 9}, {}, {11}};
  for (const KindVariant& v : static_step_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      for (const int64_t beam : {1, 3})
        for (const bool compact : {true, false})
          for (const bool with_prefixes : {false, true}) {
            INFO("beam " << beam << (compact ? ", compact" : "") << (with_prefixes ? ", prefixes" : ""));
            SearchOptions o;
            o.beam_size = beam;
            o.nbest = beam;
            o.max_len_a = 1.0;
            o.max_len_b = 4;
            o.compact = compact;
            SearchOptions s = o;
            s.static_steps = true;
            check_same_translations(*m, batch.src, batch.src_mask, o, s, with_prefixes ? prefixes : Prefixes{},
                                    1e-5);
          }
    }
  }
}
