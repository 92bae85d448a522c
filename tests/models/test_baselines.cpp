// The RetNet and RNNsearch baselines (models/retnet.h, models/rnnsearch.h):
// what is particular to them (left padding, the retention state and decays,
// RNNsearch's alignment weights, plan reports, presets, config rules, explain
// hooks). The shared invariants (decoding equals teacher forcing, padding,
// gradients, beam search, reordering) run on them in test_invariants.cpp.
#include <catch2/catch.hpp>

#include <c10/core/impl/LocalDispatchKeySet.h>

#include <cmath>

#include "core/autocast.h"
#include "core/error.h"
#include "model_helpers.h"
#include "models/plan.h"
#include "models/retnet.h"
#include "models/rnnsearch.h"
#include "models/search.h"
#include "test_util.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

core::ModelConfig preset_config(const std::string& kind, const std::string& preset) {
  return core::parse_experiment("[model]\nkind = \"" + kind + "\"\npreset = \"" + preset + "\"\n", "p.toml").model;
}

std::string config_error(const std::string& text) {
  try {
    core::parse_experiment(text, "x.toml");
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("retnet and rnnsearch: padding on the left of the source changes nothing", "[models][invariant]") {
  TestBatch batch = make_batch({3, 6}, {4, 4}, kVocab, 5);
  torch::Tensor left_src = torch::zeros_like(batch.src), left_mask = torch::zeros_like(batch.src_mask);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t n = batch.src_len[b], s = batch.src.size(1);
    left_src[b].narrow(0, s - n, n).copy_(batch.src[b].narrow(0, 0, n));
    left_mask[b].narrow(0, s - n, n).fill_(true);
  }
  for (const std::string kind : {"retnet", "rnnsearch"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind));
      torch::NoGradGuard no_grad;
      torch::Tensor a = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      torch::Tensor b = m->forward(left_src, left_mask, batch.tgt_in, batch.tgt_mask);
      CHECK(rel_err(b, a) <= 1e-5);
    }
  }
}

TEST_CASE("retention: the recurrent state is (B,H,dk,dv) and the decays are 1 - 2^(-5-h)", "[models][retnet]") {
  torch::Tensor g = retention_log_decays(4).exp();
  for (int64_t h = 0; h < 4; ++h) CHECK(g[h].item<double>() == Approx(1.0 - std::pow(2.0, -5.0 - h)));
  ModelPtr m = tiny_model(tiny_config("retnet", "n_heads = 4\n"));  // d 32: dk 8, dv 16
  TestBatch batch = make_batch({3, 5}, {2, 2});
  InferenceState st = m->start(batch.src, batch.src_mask);
  REQUIRE(st.layers.size() == 4);
  CHECK(st.layers[0].recurrent.sizes() == torch::IntArrayRef({2, 4, 8, 16}));
  CHECK(st.layers[0].recurrent.scalar_type() == torch::kFloat);
  CHECK(!st.layers[0].self.k.defined());
  CHECK(!st.layers[0].mamba.ssm.defined());
  CHECK(m->plan().decoder_only);
  CHECK(m->plan().decoder.front().name() == "retention+mlp");
}

TEST_CASE("retention in float64 matches a direct evaluation of the parallel form", "[models][retnet]") {
  // O[n] = sum_{m <= n} gamma^(n-m) (q_n . k_m) v_m per head, then group norm, gate, output.
  torch::manual_seed(5);
  RetentionOptions o(16, 2);
  Retention r(o);
  r->to(torch::kDouble);
  const int64_t b = 1, l = 6;
  torch::Tensor x = torch::randn({b, l, 16}, torch::kDouble);
  SeqInfo info = SeqInfo::from_mask({}, b, l, x.device());
  torch::Tensor y = r->forward(x, info, nullptr);
  // Recurrent form from a zero state, in float64.
  LayerState st;
  r->init_state(st, b, 0, x.options());
  CHECK(st.recurrent.scalar_type() == torch::kDouble);
  for (int64_t t = 0; t < l; ++t) {
    torch::Tensor yt = r->step(x.select(1, t), StepInfo{torch::full({b}, t, torch::kLong)}, st);
    CHECK(rel_err(yt, y.select(1, t)) <= 1e-12);
  }
}

// Under bf16 autocast without gradients (evaluation on a GPU) the retention
// itself runs in float32: its products in bf16 put the tiny model's logits 8%
// (of the largest) off their float32 values, ten times the Transformer's
// drift (the group norm rescales each head's small output). Training keeps
// bf16 products.
TEST_CASE("retention under bf16 autocast keeps its products and state in float32 when evaluating",
          "[models][retnet]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  ModelPtr m = tiny_model(tiny_config("retnet"));
  torch::NoGradGuard no_grad;
  const torch::Tensor f32 = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
  const core::Bf16Autocast autocast(c10::DeviceType::CPU);
  const torch::Tensor bf = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask).to(torch::kFloat);
  CHECK(rel_err(bf, f32) <= 0.05);
  {
    // With gradients (training) the products are bf16's: farther from float32.
    torch::AutoGradMode grad(true);
    const torch::Tensor train = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask).to(torch::kFloat);
    CHECK(rel_err(train, f32) > rel_err(bf, f32));
  }
  // A prefill's state comes out of a product: float32, not bf16.
  InferenceState st = m->prefill(batch.src, batch.src_mask, batch.tgt_in.narrow(1, 0, 3));
  for (const LayerState& l : st.layers) CHECK(l.recurrent.scalar_type() == torch::kFloat);
  // Steps after it stay near float32 as well.
  InferenceState ref;
  {
    const c10::impl::ExcludeDispatchKeyGuard off(c10::autocast_dispatch_keyset);
    ref = m->prefill(batch.src, batch.src_mask, batch.tgt_in.narrow(1, 0, 3));
  }
  for (int64_t t = 3; t < batch.tgt_in.size(1); ++t) {
    const torch::Tensor step = m->step(st, batch.tgt_in.select(1, t)).to(torch::kFloat);
    torch::Tensor want;
    {
      const c10::impl::ExcludeDispatchKeyGuard off(c10::autocast_dispatch_keyset);
      want = m->step(ref, batch.tgt_in.select(1, t));
    }
    const torch::Tensor real = batch.tgt_mask.select(1, t);
    INFO("position " << t);
    CHECK(rel_err(step.index({real}), want.index({real})) <= 0.05);
  }
}

TEST_CASE("rnnsearch: attention weights are a distribution over the real source tokens", "[models][rnnsearch]") {
  TestBatch batch = make_batch({4, 7, 2}, {5, 3, 6}, kVocab, 13);
  ModelPtr m = tiny_model(tiny_config("rnnsearch"));
  auto* rnn = dynamic_cast<RnnSearchModel*>(m.get());
  REQUIRE(rnn != nullptr);
  torch::Tensor w = rnn->attention_weights(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
  REQUIRE(w.sizes() == torch::IntArrayRef({3, 6, 7}));
  CHECK(w.scalar_type() == torch::kFloat);
  CHECK(!w.requires_grad());
  for (int64_t b = 0; b < 3; ++b) {
    INFO("row " << b);
    const int64_t n = batch.src_len[b];
    CHECK(torch::allclose(w[b].narrow(0, 0, batch.tgt_len[b]).sum(-1), torch::ones({batch.tgt_len[b]}), 1e-5, 1e-5));
    if (n < 7) CHECK(w[b].narrow(1, n, 7 - n).abs().max().item<double>() == 0.0);
    CHECK(w[b].narrow(1, 0, n).min().item<double>() > 0.0);
    // The same alone.
    TestBatch r = batch.row(b);
    torch::Tensor alone = rnn->attention_weights(r.src, r.src_mask, r.tgt_in, r.tgt_mask);
    CHECK(rel_err(w[b].narrow(0, 0, batch.tgt_len[b]).narrow(1, 0, n), alone[0]) <= 1e-5);
  }
  // Left padding: the weights come back at the columns the tokens were given in.
  torch::Tensor left_src = torch::zeros_like(batch.src), left_mask = torch::zeros_like(batch.src_mask);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = batch.src_len[b];
    left_src[b].narrow(0, 7 - n, n).copy_(batch.src[b].narrow(0, 0, n));
    left_mask[b].narrow(0, 7 - n, n).fill_(true);
  }
  torch::Tensor lw = rnn->attention_weights(left_src, left_mask, batch.tgt_in, batch.tgt_mask);
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = batch.src_len[b];
    CHECK(rel_err(lw[b].narrow(1, 7 - n, n), w[b].narrow(1, 0, n)) <= 1e-5);
  }
}

TEST_CASE("rnnsearch: the decoding state holds s, the annotations and their keys", "[models][rnnsearch]") {
  ModelPtr m = tiny_model(tiny_config("rnnsearch", "d_ff = 40\n"));  // m 32, n 40
  TestBatch batch = make_batch({3, 5}, {2, 2});
  InferenceState st = m->start(batch.src, batch.src_mask);
  REQUIRE(st.layers.size() == 1);
  CHECK(st.layers[0].recurrent.sizes() == torch::IntArrayRef({2, 40}));
  CHECK(st.layers[0].cross.v.sizes() == torch::IntArrayRef({2, 5, 80}));
  CHECK(st.layers[0].cross.k.sizes() == torch::IntArrayRef({2, 5, 40}));
  CHECK(st.src_len.equal(torch::tensor(std::vector<int64_t>{3, 5})));
  CHECK(m->decoder_parameter_count() < m->parameter_count());
  CHECK(!m->plan().decoder_only);
  CHECK(m->plan().encoder.size() == 2);
}

TEST_CASE("retnet and rnnsearch: plan reports count what the models hold", "[models][plan]") {
  for (const KindVariant& v : model_variants()) {
    if (v.kind != "retnet" && v.kind != "rnnsearch") continue;
    INFO(v.name);
    core::ModelConfig c = tiny_config(v.kind, v.extra);
    ModelPtr m = tiny_model(c);
    CHECK(count_parameters(c, kVocab) == m->parameter_count());
    const std::string r = plan_report(c, kVocab);
    CHECK_THAT(r, Catch::Contains("total: "));
    CHECK_THAT(r, Catch::Contains("kind " + v.kind));
  }
  CHECK_THAT(plan_report(tiny_config("retnet"), kVocab), Catch::Contains("   3  retention+mlp"));
  CHECK_THAT(plan_report(tiny_config("rnnsearch"), kVocab), Catch::Contains("encoder: 2 bidirectional GRU layers"));
}

TEST_CASE("retnet and rnnsearch presets hit their parameter counts (32k vocabulary)", "[models][plan][preset]") {
  const std::vector<std::pair<std::string, double>> targets = {
      {"small", 25e6}, {"base", 77e6}, {"medium", 200e6}, {"large", 400e6}};
  for (const std::string kind : {"retnet", "rnnsearch"}) {
    for (const auto& [preset, target] : targets) {
      const core::ModelConfig c = preset_config(kind, preset);
      const double n = static_cast<double>(count_parameters(c, 32000));
      INFO(kind << " " << preset << ": " << n / 1e6 << "M, target " << target / 1e6 << "M");
      CHECK(std::abs(n - target) / target <= 0.15);
    }
  }
  // RetNet base is the SSM-for-MT paper's (Table 5): 12 layers, 4 heads, d 512, FFN 1024.
  const core::ModelConfig r = preset_config("retnet", "base");
  CHECK(r.dec_layers == 12);
  CHECK(r.n_heads == 4);
  CHECK(r.d_model == 512);
  CHECK(r.d_ff == 1024);
  // RNNsearch keeps the paper's 1000-unit GRUs and one layer each side.
  const core::ModelConfig s = preset_config("rnnsearch", "base");
  CHECK(s.d_ff == 1000);
  CHECK(s.enc_layers == 1);
  CHECK(s.dec_layers == 1);
  // The tiny presets build.
  for (const std::string kind : {"retnet", "rnnsearch"}) {
    ModelPtr m = tiny_model(preset_config(kind, "tiny"), 120);
    CHECK(m->parameter_count() == count_parameters(m->config(), 120));
  }
}

TEST_CASE("retnet and rnnsearch: config rules", "[models][config]") {
  CHECK(config_error("[model]\nkind = \"rnnsearch\"\ndec_layers = 2\n") ==
        "x.toml:3:1: model.dec_layers = 2: kind rnnsearch has one decoder GRU (use enc_layers for a deeper encoder)");
  CHECK(core::parse_experiment("[model]\nkind = \"rnnsearch\"\n", "x").model.dec_layers == 1);
  CHECK(core::parse_experiment("[model]\nkind = \"rnnsearch\"\nd_model = 620\nd_ff = 1000\n", "x").model.d_model == 620);
  CHECK_THAT(config_error("[model]\nkind = \"retnet\"\ndec_plan = [\"mamba\"]\n"),
             Catch::StartsWith("x.toml:3:1: kind retnet has a fixed plan"));
  CHECK_THAT(config_error("[model]\nkind = \"rnnsearch\"\nenc_plan = [\"bimamba\"]\n"),
             Catch::StartsWith("x.toml:3:1: kind rnnsearch has a fixed plan"));
  CHECK(config_error("[model]\nkind = \"retnet\"\nd_model = 36\nn_heads = 4\n") ==
        "x.toml:4:1: model.d_model / model.n_heads = 9: retention rotates pairs of key dimensions and needs an even "
        "width per head");
  CHECK_THAT(config_error("[model]\nkind = \"rnnsearch\"\nenc_layers = 0\n"),
             Catch::Contains("kind rnnsearch needs an encoder"));
  // The Mamba keys do not constrain them.
  CHECK(config_error("[model]\nkind = \"retnet\"\nd_model = 100\nn_heads = 2\nheaddim = 64\n").empty());
}

TEST_CASE("configs/ablation.toml runs retnet and rnnsearch base as baselines", "[models][config]") {
  const core::GridConfig grid = core::load_grid(source_dir() + "/configs/ablation.toml");
  int found = 0;
  for (const core::GridVariant& v : grid.variants) {
    if (v.name != "retnet" && v.name != "rnnsearch") continue;
    ++found;
    INFO(v.name);
    const core::ExperimentConfig c = grid.point(v.overrides, v.override_places);
    CHECK(c.model.kind == v.name);
    CHECK(c.model.preset == "base");
    const double n = static_cast<double>(count_parameters(c.model, 32000));
    CHECK(std::abs(n - 77e6) / 77e6 <= 0.15);
  }
  CHECK(found == 2);
}

TEST_CASE("retnet and rnnsearch: final_hidden is what forward() projects to logits", "[models][explain]") {
  for (const std::string kind : {"retnet", "rnnsearch"}) {
    for (const char* tie : {"true", "false"}) {
      INFO(kind << " tie_embeddings " << tie);
      ModelPtr m = tiny_model(tiny_config(kind, std::string("tie_embeddings = ") + tie + "\n"));
      TestBatch b = make_batch({5, 3}, {4, 6});
      torch::NoGradGuard no_grad;
      torch::Tensor h = m->final_hidden(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
      REQUIRE(h.sizes() == torch::IntArrayRef({2, 6, 32}));
      torch::Tensor w;
      for (auto& item : m->named_parameters())
        if (item.key() == "out_proj.weight" ||
            (!w.defined() && (item.key() == "embed.weight" || item.key() == "tgt_embed.weight")))
          w = item.value();
      REQUIRE(w.defined());
      CHECK(rel_err(torch::matmul(h, w.t()), m->forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask)) < 1e-5);
    }
  }
}

TEST_CASE("rnnsearch's source attention is its alignment and retnet has none", "[models][explain]") {
  TestBatch b = make_batch({5, 3}, {4, 6});
  ModelPtr r = tiny_model(tiny_config("rnnsearch"));
  CHECK(r->has_source_attention());
  std::vector<SourceAttention> maps = r->source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
  REQUIRE(maps.size() == 1);
  CHECK(maps[0].layer == "decoder.attention");
  REQUIRE(maps[0].weights.sizes() == torch::IntArrayRef({2, 1, 6, 5}));
  auto* rnn = dynamic_cast<RnnSearchModel*>(r.get());
  REQUIRE(rnn != nullptr);
  CHECK(torch::equal(maps[0].weights[0][0], rnn->attention_weights(b.src, b.src_mask, b.tgt_in, b.tgt_mask)[0]));
  ModelPtr t = tiny_model(tiny_config("retnet"));
  CHECK_FALSE(t->has_source_attention());
  CHECK(t->source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask).empty());
}
