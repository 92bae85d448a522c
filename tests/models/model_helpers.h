#pragma once
// Helpers of the model tests: tiny configs, random padded batches, comparisons.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <string>
#include <vector>

#include "core/autocast.h"
#include "core/config.h"
#include "models/model.h"
#include "models/registry.h"
#include "models/search.h"

namespace mambamt::models::test {

// A validated tiny config of `kind` (d_model 32, Mamba-2 with 4 heads of 16,
// d_state 8, 3 encoder and 4 decoder layers (rnnsearch: 2 bidirectional GRU
// layers, one decoder GRU), no dropout) plus extra TOML lines.
// Keys given in `extra` (or layer counts implied by a plan) replace the defaults.
inline core::ModelConfig tiny_config(const std::string& kind, const std::string& extra = "") {
  auto has = [&](const std::string& key) { return extra.find(key + " =") != std::string::npos; };
  std::string text = "[model]\nkind = \"" + kind + "\"\n" + extra;
  const std::vector<std::pair<std::string, std::string>> defaults = {
      {"d_model", "32"}, {"n_heads", "2"},   {"d_ff", "48"},     {"d_state", "8"},
      {"headdim", "16"}, {"dropout", "0.0"}};
  for (const auto& [key, value] : defaults)
    if (!has(key)) text += key + " = " + value + "\n";
  // The normal init unless `extra` names a scheme; its deviation 0.1 unless given.
  if (!has("init")) text += std::string("init = \"normal\"\n") + (has("init_std") ? "" : "init_std = 0.1\n");
  if (!has("enc_layers") && !has("enc_plan") && (kind == "hybrid" || kind == "transformer")) text += "enc_layers = 3\n";
  // rnnsearch: two stacked bidirectional GRU layers and its one decoder GRU.
  if (!has("enc_layers") && kind == "rnnsearch") text += "enc_layers = 2\n";
  if (!has("dec_layers") && !has("dec_plan") && kind != "rnnsearch") text += "dec_layers = 4\n";
  return core::parse_experiment(text, "test.toml").model;
}

constexpr int64_t kVocab = 23;

inline ModelPtr tiny_model(const core::ModelConfig& c, int64_t vocab = kVocab, int64_t boundary = -1) {
  torch::manual_seed(7);
  ModelContext ctx;
  ctx.vocab_size = vocab;
  ctx.boundary = boundary;
  ModelPtr m = build_model(c, ctx);
  m->eval();
  return m;
}

// A right-padded batch in the data layout: src s.. eos, tgt_in bos t.., tgt_out t.. eos.
struct TestBatch {
  torch::Tensor src, src_mask, tgt_in, tgt_out, tgt_mask;
  std::vector<int64_t> src_len, tgt_len;
  int64_t size() const { return src.size(0); }
  // Row b alone, without padding.
  TestBatch row(int64_t b) const {
    TestBatch r;
    r.src = src.narrow(0, b, 1).narrow(1, 0, src_len[b]);
    r.src_mask = src_mask.narrow(0, b, 1).narrow(1, 0, src_len[b]);
    r.tgt_in = tgt_in.narrow(0, b, 1).narrow(1, 0, tgt_len[b]);
    r.tgt_out = tgt_out.narrow(0, b, 1).narrow(1, 0, tgt_len[b]);
    r.tgt_mask = tgt_mask.narrow(0, b, 1).narrow(1, 0, tgt_len[b]);
    r.src_len = {src_len[b]};
    r.tgt_len = {tgt_len[b]};
    return r;
  }
};

inline TestBatch make_batch(const std::vector<int64_t>& src_len, const std::vector<int64_t>& tgt_len,
                            int64_t vocab = kVocab, uint64_t seed = 3) {
  torch::manual_seed(seed);
  const int64_t b = static_cast<int64_t>(src_len.size());
  const int64_t s = *std::max_element(src_len.begin(), src_len.end());
  const int64_t t = *std::max_element(tgt_len.begin(), tgt_len.end());
  TestBatch x;
  x.src_len = src_len;
  x.tgt_len = tgt_len;
  x.src = torch::zeros({b, s}, torch::kLong);
  x.tgt_in = torch::zeros({b, t}, torch::kLong);
  x.tgt_out = torch::zeros({b, t}, torch::kLong);
  x.src_mask = torch::zeros({b, s}, torch::kBool);
  x.tgt_mask = torch::zeros({b, t}, torch::kBool);
  for (int64_t i = 0; i < b; ++i) {
    const int64_t n = src_len[i], m = tgt_len[i];
    x.src[i].narrow(0, 0, n).copy_(torch::randint(5, vocab, {n}, torch::kLong));
    x.src[i][n - 1] = 3;  // eos
    x.src_mask[i].narrow(0, 0, n).fill_(true);
    torch::Tensor words = torch::randint(5, vocab, {m}, torch::kLong);
    x.tgt_in[i][0] = 2;  // bos
    if (m > 1) x.tgt_in[i].narrow(0, 1, m - 1).copy_(words.narrow(0, 0, m - 1));
    x.tgt_out[i].narrow(0, 0, m).copy_(words);
    x.tgt_out[i][m - 1] = 3;
    x.tgt_mask[i].narrow(0, 0, m).fill_(true);
  }
  return x;
}

// A model kind with TOML lines under [model] for tiny_config.
struct KindVariant {
  std::string name, kind, extra;
  int64_t boundary = -1;  // the decoder-only boundary token (-1: none)
};

// Every kind, and the plan features each one can take: the model invariants
// (test_invariants.cpp) run on all of them, the baselines' own tests on
// their retnet and rnnsearch rows.
inline std::vector<KindVariant> model_variants() {
  return {
      {"hybrid default (1:7 middle_end, cross every 4)", "hybrid", ""},
      {"hybrid 1:3 uniform, cross every 2, gated", "hybrid",
       "attention_ratio = 0.25\nattention_placement = \"uniform\"\ncross_attn_every = 2\ncross_attn = \"gated\"\n"},
      {"hybrid explicit plans, local self- and cross-attention", "hybrid",
       "enc_plan = [\"bimamba\", \"local_attention\", \"attention\"]\n"
       "dec_plan = [\"local_attention\", \"mamba+cross\", \"attention\", \"mamba+cross\"]\n"
       "attn_window = 3\ncross_attn = \"local\"\ncross_attn_window = 4\n"},
      {"hybrid Mamba-1", "hybrid", "mamba_version = 1\n"},
      {"hybrid dense connections, Mamba MLPs, ngroups 2, untied", "hybrid",
       "dense_connections = 2\nmamba_mlp = true\nngroups = 2\ntie_embeddings = false\nmlp = \"relu\"\n"},
      {"transformer", "transformer", ""},
      {"mamba (decoder-only)", "mamba", ""},
      {"mamba-1 decoder-only with boundary token", "mamba", "mamba_version = 1\n", 4},
      {"decoder_only Mamba-MHA (1:3 middle_end)", "decoder_only", "attention_ratio = 0.25\n"},
      {"decoder_only Mamba-Local (window 3)", "decoder_only", "attention_ratio = 0.5\nattn_window = 3\n"},
      {"decoder_only Transformer++ (all attention), untied", "decoder_only",
       "attention_ratio = 1.0\ntie_embeddings = false\n", 4},
      {"retnet", "retnet", ""},
      {"retnet 4 heads, relu MLP, untied, boundary token", "retnet",
       "n_heads = 4\nd_model = 64\nmlp = \"relu\"\ntie_embeddings = false\n", 4},
      {"rnnsearch (2 bidirectional GRU layers, tied)", "rnnsearch", ""},
      {"rnnsearch one encoder layer, untied", "rnnsearch", "enc_layers = 1\ntie_embeddings = false\nd_ff = 40\n"},
  };
}

// Every kind that steps a static state (models/graph.h), with the layer kinds
// whose state differs: full attention (spans), rings (sliding windows), both
// Mamba versions, local and gated cross-attention, dense connections,
// retention. The static steps' tests on the CPU and the graphs' on a GPU.
inline std::vector<KindVariant> static_step_variants() {
  return {
      {"hybrid default", "hybrid", ""},
      {"hybrid local self- and cross-attention, Mamba-1", "hybrid",
       "dec_plan = [\"local_attention\", \"mamba+cross\", \"attention\", \"mamba+cross\"]\n"
       "attn_window = 5\ncross_attn = \"local\"\ncross_attn_window = 4\nmamba_version = 1\n"},
      {"hybrid gated cross every 2, dense connections", "hybrid",
       "cross_attn_every = 2\ncross_attn = \"gated\"\ndense_connections = 2\n"},
      {"transformer", "transformer", ""},
      {"mamba (decoder-only)", "mamba", ""},
      {"decoder_only Mamba-MHA", "decoder_only", "attention_ratio = 0.25\n"},
      {"decoder_only Mamba-Local (window 16)", "decoder_only", "attention_ratio = 0.5\nattn_window = 16\n"},
      {"retnet", "retnet", ""},
  };
}

// Whether a state has a full-attention KV cache (static steps with a span,
// one CUDA graph per span).
inline bool full_attention(const InferenceState& st) {
  for (const LayerState& l : st.layers)
    if (l.self.k.defined() && l.self.window == 0) return true;
  return false;
}

// The n-best lists of translate() with `other` against those with `usual`
// (options of short outputs, nbest = beam): the same hypotheses, tokens, ends
// and log-probabilities (relative `eps`).
inline void check_same_translations(TranslationModel& m, const torch::Tensor& src, const torch::Tensor& src_mask,
                                    const SearchOptions& usual, const SearchOptions& other, const Prefixes& prefixes,
                                    double eps) {
  const std::vector<NBest> want = translate(m, src, src_mask, usual, prefixes);
  const std::vector<NBest> got = translate(m, src, src_mask, other, prefixes);
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    INFO("source " << i);
    REQUIRE(got[i].size() == want[i].size());
    for (size_t j = 0; j < want[i].size(); ++j) {
      CHECK(got[i][j].tokens == want[i][j].tokens);
      CHECK(got[i][j].finished == want[i][j].finished);
      CHECK(got[i][j].log_prob == Approx(want[i][j].log_prob).epsilon(eps));
    }
  }
}

// How far step-by-step decoding may drift from teacher forcing under bf16
// autocast, relative to the largest logit. RetNet's group norm rescales each
// head's small output, so the bf16 rounding of its projections weighs more:
// 0.028 measured on the CPU in the tiny test model (its retention in float32;
// 0.08 when its products ran in bf16 too), against at most 0.012 for the
// other kinds.
inline double bf16_decode_tolerance(const std::string& kind) { return kind == "retnet" ? 0.06 : 3e-2; }

// max |a - b| / max |b| (0 when both are empty).
inline double rel_err(const torch::Tensor& a, const torch::Tensor& b) {
  if (b.numel() == 0) return 0.0;
  const double den = b.abs().max().item<double>();
  return (a.to(torch::kDouble) - b.to(torch::kDouble)).abs().max().item<double>() / (den > 0 ? den : 1.0);
}

// Steps m through batch's targets from start() (a small reserve, so KV caches
// grow on the way) and checks each step's logits at the real positions
// against `forced` (B,T,V), the teacher-forced logits, within tol.
inline void check_steps_follow(TranslationModel& m, const TestBatch& batch, const torch::Tensor& forced,
                               double tol = 1e-4) {
  InferenceState st = m.start(batch.src, batch.src_mask, /*reserve=*/2);
  for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
    torch::Tensor step = m.step(st, batch.tgt_in.select(1, t));
    torch::Tensor real = batch.tgt_mask.select(1, t);
    INFO("position " << t);
    CHECK(rel_err(step.index({real}), forced.select(1, t).index({real})) <= tol);
  }
}

// Beam search with beam size 1 against greedy search on `batch` (outputs of
// at most source length + 4 tokens, rows dropped as they finish or, with
// `compact` false, kept): the same tokens, ends and log-probabilities.
// Returns greedy's hypotheses.
inline std::vector<Hypothesis> check_beam_one_is_greedy(TranslationModel& m, const TestBatch& batch,
                                                        bool compact = true) {
  SearchOptions o;
  o.max_len_a = 1.0;
  o.max_len_b = 4;
  o.beam_size = 1;
  o.compact = compact;
  auto greedy = greedy_search(m, batch.src, batch.src_mask, o);
  auto beam = beam_search(m, batch.src, batch.src_mask, o);
  const auto rows = static_cast<size_t>(batch.size());
  REQUIRE(greedy.size() == rows);
  REQUIRE(beam.size() == rows);
  for (size_t b = 0; b < rows; ++b) {
    INFO("row " << b);
    REQUIRE(beam[b].size() == 1);
    CHECK(beam[b][0].tokens == greedy[b].tokens);
    CHECK(beam[b][0].finished == greedy[b].finished);
    CHECK(beam[b][0].log_prob == Approx(greedy[b].log_prob).epsilon(1e-5));
    const int64_t max_len = batch.src_len[b] + 4;
    CHECK(static_cast<int64_t>(greedy[b].tokens.size()) + (greedy[b].finished ? 1 : 0) <= max_len);
  }
  return greedy;
}

}  // namespace mambamt::models::test
