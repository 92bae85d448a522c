// Gated cross-attention skipping tokens whose gate is nearly closed
// (eval.gate_skip): the skipped outputs are exactly zero, the others as
// before, on every path (decode step, teacher forcing, the CPU kernel's row
// mask), and step-by-step decoding still gives the teacher-forced logits.
#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>

#include "model_helpers.h"
#include "models/detail/decode_cpu.h"
#include "models/layers.h"
#include "skip.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

// The gates of every gated cross-attention module in a teacher-forced pass.
std::vector<torch::Tensor> recorded_gates(TranslationModel& m, const TestBatch& b) {
  const std::vector<CrossAttentionImpl*> gated = gated_cross_attention(m);
  for (auto* c : gated) c->record_gate = true;
  m.forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
  std::vector<torch::Tensor> out;
  for (auto* c : gated) {
    out.push_back(c->last_gate);
    c->record_gate = false;
  }
  return out;
}

}  // namespace

TEST_CASE("a cross-attention token below the gate threshold outputs zero, the others what they did", "[models][gates]") {
  torch::manual_seed(3);
  CrossAttention cross(CrossAttentionOptions(32, 2).kind(CrossAttentionKind::kGated));
  cross->eval();
  {
    // Gates spread over (0, 1) instead of all near 0.5.
    torch::NoGradGuard no_grad;
    cross->gate->weight.normal_(0.0, 1.0);
  }
  const int64_t b = 6, s = 7;
  torch::Tensor mask = torch::ones({b, s}, torch::kBool);
  mask[1].narrow(0, 4, 3).fill_(false);
  CrossKv kv = cross->memory(torch::randn({b, s, 32}), mask);
  for (int64_t t : {1, 5}) {
    SECTION(t == 1 ? "a decode step" : "teacher forcing") {
      torch::NoGradGuard no_grad;
      torch::Tensor x = torch::randn({b, t, 32});
      torch::Tensor positions = torch::arange(t).repeat({b, 1});
      cross->record_gate = true;
      torch::Tensor full = cross(x, positions, kv);
      torch::Tensor gates = cross->last_gate.clone();  // (B,T)
      cross->record_gate = false;
      // The median: some tokens on each side.
      const double threshold = gates.flatten().median().item<double>() + 1e-6;
      torch::Tensor open = gates.ge(threshold);
      REQUIRE(open.any().item<bool>());
      REQUIRE(open.logical_not().any().item<bool>());
      cross->skip_below = threshold;
      torch::Tensor skipped = cross(x, positions, kv);
      CHECK(torch::equal(skipped, full * open.unsqueeze(-1)));
      // Every token closed: zero.
      cross->skip_below = 1.0;
      CHECK(torch::equal(cross(x, positions, kv), torch::zeros_like(full)));
      // In training the gate never skips.
      cross->train();
      torch::manual_seed(1);
      torch::Tensor train_out = cross(x, positions, kv);
      cross->skip_below = 0;
      torch::manual_seed(1);
      CHECK(torch::equal(train_out, cross(x, positions, kv)));
      cross->eval();
      cross->skip_below = 0;
    }
  }
}

TEST_CASE("the CPU attention kernel reads no K/V of rows it skips", "[models][gates]") {
  // Without it the step keeps models::attend, which masks the gate instead.
  if (!models::detail::attend_cached_available()) MAMBAMT_SKIP("no CPU attention kernel on this CPU (AVX2)");
  const int64_t b = 4, h = 2, cap = 9, dh = 16, n = 6;
  torch::Tensor q = torch::randn({b, h, 1, dh}), k = torch::randn({b, h, cap, dh}), v = torch::randn({b, h, cap, dh});
  torch::Tensor valid = torch::ones({b, cap}, torch::kBool);
  torch::Tensor rows = torch::tensor({true, false, true, false});
  // A skipped row's K/V may hold anything: they are not read.
  k[1].fill_(std::numeric_limits<float>::quiet_NaN());
  v[3].fill_(std::numeric_limits<float>::quiet_NaN());
  torch::Tensor got = models::detail::attend_cached(q, k, v, valid, n, rows);
  torch::Tensor want = attend(q, k.narrow(2, 0, n), v.narrow(2, 0, n), valid.narrow(1, 0, n).view({b, 1, 1, n}), 0.0,
                              false)
                           .view({b, h, dh});
  for (int64_t r : {0, 2}) CHECK(rel_err(got[r], want[r]) <= 1e-5);
  for (int64_t r : {1, 3}) CHECK(torch::equal(got[r], torch::zeros({h, dh})));
}

TEST_CASE("with gates skipping, step-by-step decoding gives the teacher-forced logits", "[models][gates]") {
  for (const char* kind : {"hybrid", "transformer"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind, "cross_attn = \"gated\"\ncross_attn_every = 1\n"));
      {
        torch::NoGradGuard no_grad;
        for (auto* c : gated_cross_attention(*m)) c->gate->weight.normal_(0.0, 0.5);
      }
      m->eval();
      TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
      torch::NoGradGuard no_grad;
      const torch::Tensor open_logits = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      // A threshold between the gates of the first gated layer: it skips some tokens, not all.
      const torch::Tensor first = recorded_gates(*m, batch).front().masked_select(batch.tgt_mask);
      const double threshold = first.median().item<double>() + 1e-6;
      CHECK(set_gate_skip(*m, threshold) == m->config().dec_layers);
      const torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      CHECK(rel_err(forced, open_logits) > 1e-3);  // skipping changed something
      check_steps_follow(*m, batch, forced);
      // Every gate closed: the decoder never sees the source, so every source
      // gives the same logits for the same target.
      set_gate_skip(*m, 1.0);
      TestBatch same_target = make_batch({5, 3}, {4, 4});
      same_target.tgt_in[1].copy_(same_target.tgt_in[0]);
      const torch::Tensor blind = m->forward(same_target.src, same_target.src_mask, same_target.tgt_in, same_target.tgt_mask);
      CHECK(rel_err(blind[0], blind[1]) <= 1e-6);
      set_gate_skip(*m, 0.0);
      CHECK(rel_err(m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask), open_logits) == 0);
    }
  }
}

TEST_CASE("set_gate_skip finds the gated cross-attention modules only", "[models][gates]") {
  ModelPtr full = tiny_model(tiny_config("hybrid"));
  CHECK(set_gate_skip(*full, 0.5) == 0);
  ModelPtr gated = tiny_model(tiny_config("hybrid", "cross_attn = \"gated\"\ncross_attn_every = 2\n"));
  const int64_t layers = gated->config().dec_layers;
  CHECK(set_gate_skip(*gated, 0.5) == (layers + 1) / 2);
}
