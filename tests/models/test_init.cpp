// The weights' initialisation (models/init.h, model.init): the statistics of
// the standard scheme, the scale it gives the first logits, and the model
// invariants under it (the other model tests use the normal scheme).
#include <catch2/catch.hpp>

#include <cmath>

#include "model_helpers.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

torch::Tensor named(const TranslationModel& m, const std::string& name) {
  for (const auto& p : m.named_parameters())
    if (p.key() == name) return p.value();
  FAIL("no parameter " << name);
  return {};
}

double stdev(const torch::Tensor& t) { return t.to(torch::kDouble).std().item<double>(); }
double max_abs(const torch::Tensor& t) { return t.abs().max().item<double>(); }

// Uniform on (-bound, bound): inside it, with the standard deviation bound/sqrt(3).
void check_uniform(const torch::Tensor& w, double bound) {
  INFO("shape " << w.sizes() << ", bound " << bound);
  CHECK(max_abs(w) <= bound);
  CHECK(stdev(w) == Approx(bound / std::sqrt(3.0)).epsilon(0.08));
}

double xavier_bound(const torch::Tensor& w) { return std::sqrt(6.0 / static_cast<double>(w.size(0) + w.size(1))); }

}  // namespace

TEST_CASE("the standard init: Xavier-uniform matrices, zero biases, embeddings N(0, 1/sqrt(d))", "[models][init]") {
  const int64_t vocab = 2000;
  SECTION("transformer") {
    core::ModelConfig c = tiny_config("transformer", "init = \"standard\"\nd_model = 128\nd_ff = 256\nn_heads = 4\n");
    ModelPtr m = tiny_model(c, vocab);
    CHECK(stdev(named(*m, "embed.weight")) == Approx(1.0 / std::sqrt(128.0)).epsilon(0.03));
    CHECK(std::abs(named(*m, "embed.weight").mean().item<double>()) < 0.003);
    for (const char* w : {"encoder.layers.0.mixer.qkv.weight", "encoder.layers.0.mixer.out.weight",
                          "encoder.layers.2.mlp.up.weight", "encoder.layers.2.mlp.down.weight",
                          "decoder.layers.1.mixer.qkv.weight", "decoder.layers.3.cross.q.weight",
                          "decoder.layers.3.cross.kv.weight", "decoder.layers.3.cross.out.weight"}) {
      INFO(w);
      const torch::Tensor t = named(*m, w);
      check_uniform(t, xavier_bound(t));
    }
    // Norms start at one.
    CHECK(torch::equal(named(*m, "decoder.final_norm.weight"), torch::ones({128})));
  }
  SECTION("untied output matrices start as a tied one") {
    core::ModelConfig c = tiny_config("transformer", "init = \"standard\"\nd_model = 128\ntie_embeddings = false\n");
    ModelPtr m = tiny_model(c, vocab);
    CHECK(stdev(named(*m, "out_proj.weight")) == Approx(1.0 / std::sqrt(128.0)).epsilon(0.03));
    CHECK(stdev(named(*m, "src_embed.weight")) == Approx(1.0 / std::sqrt(128.0)).epsilon(0.03));
  }
  SECTION("Mamba blocks as mamba-ssm: U(1/sqrt(fan_in)), the output projection over sqrt(branches)") {
    // 4 decoder layers of Mamba (one residual branch each) but the cross-attention one (two).
    core::ModelConfig c = tiny_config("hybrid", "init = \"standard\"\nd_model = 128\nheaddim = 32\n");
    ModelPtr m = tiny_model(c, vocab);
    const Plan& plan = m->plan();
    int64_t branches = 0;
    for (const LayerSpec& s : plan.decoder) branches += 1 + (s.cross ? 1 : 0) + (s.mlp ? 1 : 0);
    REQUIRE(plan.decoder[0].mixer == "mamba");
    const torch::Tensor in = named(*m, "decoder.layers.0.mixer.in_proj.weight");
    const torch::Tensor out = named(*m, "decoder.layers.0.mixer.out_proj.weight");
    check_uniform(in, 1.0 / std::sqrt(128.0));
    check_uniform(out, 1.0 / std::sqrt(256.0) / std::sqrt(static_cast<double>(branches)));
    // A, D and dt start as mamba-ssm's whatever the scheme.
    const torch::Tensor a = named(*m, "decoder.layers.0.mixer.ssd.A_log").exp();
    CHECK(a.min().item<double>() >= 1.0);
    CHECK(a.max().item<double>() <= 16.0);
    CHECK(torch::equal(named(*m, "decoder.layers.0.mixer.ssd.D"), torch::ones_like(a)));
  }
  SECTION("gated cross-attention starts with every gate half open") {
    core::ModelConfig c = tiny_config("transformer", "init = \"standard\"\ncross_attn = \"gated\"\n");
    ModelPtr m = tiny_model(c, vocab);
    int gates = 0;
    for (const auto& p : m->named_parameters())
      if (p.key().find(".cross.gate.") != std::string::npos) {
        INFO(p.key());
        CHECK(torch::count_nonzero(p.value()).item<int64_t>() == 0);
        ++gates;
      }
    CHECK(gates > 0);
  }
  SECTION("the normal scheme is N(0, init_std) everywhere") {
    core::ModelConfig c = tiny_config("transformer", "init = \"normal\"\ninit_std = 0.02\nd_model = 128\n");
    ModelPtr m = tiny_model(c, vocab);
    CHECK(stdev(named(*m, "embed.weight")) == Approx(0.02).epsilon(0.03));
    CHECK(stdev(named(*m, "encoder.layers.0.mixer.qkv.weight")) == Approx(0.02).epsilon(0.05));
  }
}

TEST_CASE("the standard init gives the first logits unit scale (embeddings times sqrt(d))", "[models][init]") {
  // Tied output matrix of deviation d^-1/2 against a final norm of unit RMS:
  // logits of deviation about 1. With the normal scheme's 0.02 they start
  // near 0.02 sqrt(d), and the embeddings enter the residual stream at 1/50
  // of its branches' scale: what made training slow (docs/LEARNING.md).
  TestBatch batch = make_batch({9, 6, 11}, {8, 10, 4}, 500);
  for (const KindVariant& v : model_variants()) {
    if (v.kind == "rnnsearch") continue;  // no final norm: its logits are a maxout's
    SECTION(v.name) {
      const std::string extra = v.extra + (v.extra.find("d_model =") == std::string::npos ? "d_model = 64\n" : "");
      ModelPtr standard = tiny_model(tiny_config(v.kind, extra + "init = \"standard\"\n"), 500, v.boundary);
      ModelPtr normal = tiny_model(tiny_config(v.kind, extra + "init = \"normal\"\ninit_std = 0.02\n"), 500, v.boundary);
      torch::NoGradGuard no_grad;
      auto logit_std = [&](const ModelPtr& m) {
        torch::Tensor l = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
        return stdev(l.index({batch.tgt_mask}));
      };
      const double s = logit_std(standard), n = logit_std(normal);
      INFO("standard " << s << ", normal " << n);
      CHECK(s > 0.5);
      CHECK(s < 2.0);
      CHECK(n < 0.25);
    }
  }
}

TEST_CASE("with the standard init step-by-step decoding gives the teacher-forced logits", "[models][init][invariant]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra + "init = \"standard\"\n"), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);  // (B,T,V)
      check_steps_follow(*m, batch, forced);
      // A prefix prefilled leaves the state stepping through it leaves.
      const torch::Tensor prefix = batch.tgt_in.narrow(1, 0, 2);
      InferenceState a = m->prefill(batch.src, batch.src_mask, prefix, /*reserve=*/4);
      torch::Tensor next = m->step(a, batch.tgt_in.select(1, 2));
      torch::Tensor real = batch.tgt_mask.select(1, 2);
      CHECK(rel_err(next.index({real}), forced.select(1, 2).index({real})) <= 1e-4);
    }
  }
}
