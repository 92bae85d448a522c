// The analysis hooks of TranslationModel (what `mambamt explain` draws):
// final_hidden() gives forward()'s logits through the output projection;
// source_attention() returns one (B,H,T,S) map per layer that sees the source,
// rows summing to 1 over the real source tokens, zero at padding, the same for
// a row alone and inside a padded batch; recording is off again afterwards and
// changes no output.
#include <catch2/catch.hpp>

#include "model_helpers.h"
#include "models/layers.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

struct Variant {
  std::string name;
  std::string kind;
  std::string extra;
  int64_t boundary = -1;
  std::vector<std::string> layers;  // expected source_attention() layer names
  bool windowed = false;            // rows may not reach the source (all-zero rows allowed)
};

std::vector<Variant> variants() {
  return {
      {"hybrid default (cross-attention in the last decoder layer)", "hybrid", "", -1,
       {"decoder.3.cross"}},
      {"hybrid cross every 2, gated", "hybrid", "cross_attn_every = 2\ncross_attn = \"gated\"\n", -1,
       {"decoder.1.cross", "decoder.3.cross"}},
      {"hybrid local cross-attention", "hybrid",
       "dec_plan = [\"mamba+cross\", \"mamba\", \"attention\", \"mamba+cross\"]\ncross_attn = \"local\"\n"
       "cross_attn_window = 4\n",
       -1, {"decoder.0.cross", "decoder.3.cross"}},
      {"transformer", "transformer", "", -1,
       {"decoder.0.cross", "decoder.1.cross", "decoder.2.cross", "decoder.3.cross"}},
      {"decoder_only Mamba-MHA with boundary token", "decoder_only", "attention_ratio = 0.25\n", 4,
       {"decoder.2.attention"}},
      {"decoder_only Transformer++", "decoder_only", "attention_ratio = 1.0\n", -1,
       {"decoder.0.attention", "decoder.1.attention", "decoder.2.attention", "decoder.3.attention"}},
      {"decoder_only Mamba-Local (window 3)", "decoder_only", "attention_ratio = 0.5\nattn_window = 3\n", -1, {},
       true},
  };
}

void check_no_recording(TranslationModel& m) {
  for (auto& mod : m.modules()) {
    if (auto* c = dynamic_cast<CrossAttentionImpl*>(mod.get())) {
      CHECK_FALSE(c->record);
      CHECK_FALSE(c->last_weights.defined());
    }
    if (auto* a = dynamic_cast<AttentionImpl*>(mod.get())) {
      CHECK_FALSE(a->record);
      CHECK_FALSE(a->last_weights.defined());
    }
  }
}

}  // namespace

TEST_CASE("final_hidden is what forward() projects to logits", "[models][explain]") {
  for (const char* kind : {"hybrid", "transformer", "mamba", "decoder_only"}) {
    INFO(kind);
    for (const char* tie : {"true", "false"}) {
      ModelPtr m = tiny_model(tiny_config(kind, std::string("tie_embeddings = ") + tie + "\n"));
      TestBatch b = make_batch({5, 3}, {4, 6});
      torch::NoGradGuard no_grad;
      torch::Tensor h = m->final_hidden(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
      torch::Tensor logits = m->forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
      REQUIRE(h.sizes() == torch::IntArrayRef({2, 6, 32}));
      // The output projection: the tied embedding or out_proj.
      torch::Tensor w;
      for (auto& item : m->named_parameters()) {
        const std::string& name = item.key();
        if (name == "out_proj.weight" || (!w.defined() && (name == "embed.weight" || name == "tgt_embed.weight")))
          w = item.value();
      }
      REQUIRE(w.defined());
      CHECK(rel_err(torch::matmul(h, w.t()), logits) < 1e-5);
    }
  }
}

TEST_CASE("source attention: one map per layer that sees the source, rows summing to 1 over the real source",
          "[models][explain]") {
  for (const Variant& v : variants()) {
    INFO(v.name);
    ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
    REQUIRE(m->has_source_attention());
    TestBatch b = make_batch({6, 3, 4}, {5, 7, 2});
    const torch::Tensor logits_before = m->forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask).detach();
    std::vector<SourceAttention> maps = m->source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
    REQUIRE(!maps.empty());
    if (!v.layers.empty()) {
      std::vector<std::string> names;
      for (auto& a : maps) names.push_back(a.layer);
      CHECK(names == v.layers);
    }
    check_no_recording(*m);
    CHECK(torch::equal(m->forward(b.src, b.src_mask, b.tgt_in, b.tgt_mask), logits_before));
    for (auto& a : maps) {
      INFO(a.layer);
      REQUIRE(a.weights.sizes() == torch::IntArrayRef({3, 2, 7, 6}));
      CHECK(a.weights.scalar_type() == torch::kFloat);
      CHECK(a.weights.ge(0).all().item<bool>());
      for (int64_t r = 0; r < 3; ++r) {
        const int64_t s = b.src_len[static_cast<size_t>(r)], t = b.tgt_len[static_cast<size_t>(r)];
        torch::Tensor w = a.weights[r].narrow(1, 0, t);  // (H,t,S) the real target rows
        if (s < 6) CHECK(w.narrow(2, s, 6 - s).abs().max().item<double>() == 0.0);
        torch::Tensor sums = w.sum(-1);
        if (v.windowed)
          CHECK((sums - 1).abs().lt(1e-5).logical_or(sums.eq(0)).all().item<bool>());
        else
          CHECK((sums - 1).abs().max().item<double>() < 1e-5);
      }
      // Padding changes nothing: each row alone gives the same weights.
      for (int64_t r = 0; r < 3; ++r) {
        TestBatch one = b.row(r);
        auto alone = m->source_attention(one.src, one.src_mask, one.tgt_in, one.tgt_mask);
        REQUIRE(alone.size() == maps.size());
        for (size_t k = 0; k < maps.size(); ++k) {
          torch::Tensor in_batch = maps[k].weights[r].narrow(1, 0, one.tgt_len[0]).narrow(2, 0, one.src_len[0]);
          CHECK(rel_err(alone[k].weights[0], in_batch) < 1e-4);
        }
      }
    }
    if (v.windowed) {
      // Only local attention here: the layers are named for it.
      for (auto& a : maps) CHECK_THAT(a.layer, Catch::EndsWith(".local_attention"));
    }
  }
}

TEST_CASE("cross-attention maps are the softmax the layer computes", "[models][explain]") {
  // A one-layer decoder: the map must reproduce the layer's own output from its K/V.
  ModelPtr m = tiny_model(tiny_config("hybrid", "dec_plan = [\"mamba+cross\"]\n"));
  auto* ed = dynamic_cast<EncoderDecoderModel*>(m.get());
  REQUIRE(ed);
  TestBatch b = make_batch({5}, {4});
  torch::NoGradGuard no_grad;
  auto maps = m->source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask);
  REQUIRE(maps.size() == 1);
  // Recompute softmax(q k^T / sqrt(dh)) from the layer's projections.
  Memory mem = ed->encode(b.src, b.src_mask);
  auto& layer = ed->decoder->layers[0];
  SeqInfo info = SeqInfo::from_mask(b.tgt_mask, 1, 4, torch::kCPU);
  torch::Tensor x = ed->tgt_embed(b.tgt_in);
  torch::Tensor after_mixer = x + layer->mixer->forward(layer->mix_norm(x), info, nullptr);
  torch::Tensor q = layer->cross->q(layer->cross_norm(after_mixer)).view({1, 4, 2, 16}).transpose(1, 2);
  CrossKv kv = layer->cross->memory(mem.enc, mem.mask);
  torch::Tensor expected = torch::softmax(torch::matmul(q, kv.k.transpose(-2, -1)) / 4.0, -1);
  CHECK(rel_err(maps[0].weights, expected) < 1e-5);
}

TEST_CASE("a pure Mamba model has no source attention", "[models][explain]") {
  ModelPtr m = tiny_model(tiny_config("mamba"));
  CHECK_FALSE(m->has_source_attention());
  TestBatch b = make_batch({4}, {3});
  CHECK(m->source_attention(b.src, b.src_mask, b.tgt_in, b.tgt_mask).empty());
}

TEST_CASE("source attention wants a right-padded source", "[models][explain]") {
  ModelPtr m = tiny_model(tiny_config("transformer"));
  TestBatch b = make_batch({4, 2}, {3, 3});
  torch::Tensor left = b.src_mask.flip({1});
  CHECK_THROWS_WITH(m->source_attention(b.src, left, b.tgt_in, b.tgt_mask), Catch::Contains("right-padded"));
}
