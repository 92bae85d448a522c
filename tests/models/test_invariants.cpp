// The model invariants of DESIGN.md, for every kind and several plans:
// incremental decoding equals teacher forcing; padding never changes results;
// every parameter receives a gradient.
#include <catch2/catch.hpp>

#include <cmath>
#include <optional>

#include "model_helpers.h"
#include "models/search.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

// The teacher-forcing batch (one row) of a hypothesis after a forced prefix:
// input bos + prefix + tokens, target prefix + tokens (+ eos when finished;
// an unfinished one drops the last input). The output starts at prefix.size().
struct ForcedRow {
  torch::Tensor in, out, mask;
  std::vector<int64_t> target;
  int64_t length = 0;
};
ForcedRow forced_row(const std::vector<int64_t>& prefix, const Hypothesis& h) {
  ForcedRow f;
  std::vector<int64_t> in{2};
  in.insert(in.end(), prefix.begin(), prefix.end());
  in.insert(in.end(), h.tokens.begin(), h.tokens.end());
  f.target = prefix;
  f.target.insert(f.target.end(), h.tokens.begin(), h.tokens.end());
  if (h.finished)
    f.target.push_back(3);
  else
    in.pop_back();
  f.length = static_cast<int64_t>(f.target.size());
  f.in = torch::tensor(in, torch::kLong).view({1, f.length});
  f.out = torch::tensor(f.target, torch::kLong).view({1, f.length});
  f.mask = torch::ones({1, f.length}, torch::kBool);
  return f;
}

}  // namespace

TEST_CASE("step-by-step decoding gives the teacher-forced logits", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);  // (B,T,V)
      REQUIRE(forced.sizes() == torch::IntArrayRef({3, 9, kVocab}));
      check_steps_follow(*m, batch, forced);
    }
  }
}

namespace {

// Steps m through batch's targets under bf16 autocast against its
// teacher-forced logits under the same autocast, within tol.
void check_bf16_steps(const ModelPtr& m, const TestBatch& batch, double tol) {
  torch::NoGradGuard no_grad;
  const core::Bf16Autocast autocast(c10::DeviceType::CPU);
  torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask).to(torch::kFloat);
  InferenceState st = m->start(batch.src, batch.src_mask, /*reserve=*/2);
  for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
    torch::Tensor step = m->step(st, batch.tgt_in.select(1, t)).to(torch::kFloat);
    torch::Tensor real = batch.tgt_mask.select(1, t);
    INFO("position " << t);
    CHECK(rel_err(step.index({real}), forced.select(1, t).index({real})) <= tol);
  }
}

}  // namespace

// Evaluation on a GPU decodes under bf16 autocast: the projections' outputs
// come out in bf16 while the decoding states are created in the parameters'
// float32 (seen on an H200: every hybrid failed its evaluation with
// "causal_conv1d_step: state has dtype Float, expected BFloat16"). The
// same mix on the CPU, in bf16's precision.
TEST_CASE("under bf16 autocast step-by-step decoding follows teacher forcing", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  const std::vector<KindVariant> kinds = {
      {"hybrid default", "hybrid", ""},
      {"hybrid Mamba-1", "hybrid", "mamba_version = 1\n"},
      {"transformer", "transformer", ""},
      {"mamba", "mamba", ""},
      {"decoder_only Mamba-MHA", "decoder_only", "attention_ratio = 0.25\n"},
      {"retnet", "retnet", ""},
      {"rnnsearch", "rnnsearch", ""},
  };
  for (const KindVariant& v : kinds) {
    SECTION(v.name) {
      check_bf16_steps(tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary), batch,
                       bf16_decode_tolerance(v.kind));
    }
  }
}

// The same for a Mamba-1 model at a batch of more than 256 rows: there its
// step's x_proj and dt_proj products go to LibTorch's mm, whose autocast
// output is bf16, as on a GPU (and, at any batch, on CPUs with neither
// AVX-512 nor AVX2, or with MAMBAMT_CPU_KERNELS=generic).
TEST_CASE("under bf16 autocast a Mamba-1 step follows teacher forcing where its projections come out in bf16",
          "[models][invariant]") {
  std::vector<int64_t> src_len, tgt_len;
  for (int64_t i = 0; i < 260; ++i) {
    src_len.push_back(2 + i % 5);
    tgt_len.push_back(1 + i % 3);
  }
  check_bf16_steps(tiny_model(tiny_config("hybrid", "mamba_version = 1\n"), kVocab), make_batch(src_len, tgt_len),
                   bf16_decode_tolerance("hybrid"));
}

TEST_CASE("prefill of a target prefix leaves the state that stepping through it leaves", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  torch::manual_seed(4);
  const int64_t t = 6;
  torch::Tensor prefix = torch::randint(5, kVocab, {3, t}, torch::kLong);
  prefix.select(1, 0).fill_(2);  // bos
  const torch::Tensor next = torch::randint(5, kVocab, {2, 3}, torch::kLong);
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      InferenceState stepped = m->start(batch.src, batch.src_mask, /*reserve=*/2);
      for (int64_t i = 0; i < t; ++i) m->step(stepped, prefix.select(1, i));
      // A small reserve: the prefill allocates for the prefix, and the caches grow after it.
      InferenceState filled = m->prefill(batch.src, batch.src_mask, prefix, /*reserve=*/2);
      CHECK(torch::equal(filled.position, stepped.position));
      CHECK(torch::equal(filled.src_len, stepped.src_len));
      // Rows prefilled in groups of one and two, joined: the same state.
      InferenceState joined = InferenceState::cat(
          {m->prefill(batch.src.narrow(0, 0, 1), batch.src_mask.narrow(0, 0, 1), prefix.narrow(0, 0, 1), 2),
           m->prefill(batch.src.narrow(0, 1, 2), batch.src_mask.narrow(0, 1, 2), prefix.narrow(0, 1, 2), 2)});
      CHECK(torch::equal(joined.position, stepped.position));
      CHECK(filled.bytes().total() == stepped.bytes().total());
      CHECK(joined.bytes().total() == stepped.bytes().total());
      for (int64_t i = 0; i < next.size(0); ++i) {
        torch::Tensor want = m->step(stepped, next[i]);
        INFO("step " << i << " after the prefix");
        CHECK(rel_err(m->step(filled, next[i]), want) <= 1e-4);
        CHECK(rel_err(m->step(joined, next[i]), want) <= 1e-4);
      }
    }
  }
}

TEST_CASE("a ragged prefill leaves every row the state of its own prefix", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3, 7}, {6, 9, 2});
  torch::manual_seed(5);
  const int64_t t = 6;
  torch::Tensor prefix = torch::randint(5, kVocab, {3, t}, torch::kLong);
  prefix.select(1, 0).fill_(2);  // bos
  const torch::Tensor next = torch::randint(5, kVocab, {3, 3}, torch::kLong);
  // Rows of 4, 0 and 6 tokens (longer than the local windows of 3), then 1, 6, 3.
  for (const std::vector<int64_t>& lengths : {std::vector<int64_t>{4, 0, 6}, std::vector<int64_t>{1, 6, 3}})
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name + ", lengths " + std::to_string(lengths[0]) + " " + std::to_string(lengths[1]) + " " +
            std::to_string(lengths[2])) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      const torch::Tensor len = torch::tensor(lengths, torch::kLong);
      if (!m->prefills_ragged()) {
        CHECK_THROWS_WITH(m->prefill(batch.src, batch.src_mask, prefix, 2, len),
                          Catch::Contains("rows of different lengths"));
        // Equal lengths are a plain prefill.
        InferenceState st = m->prefill(batch.src, batch.src_mask, prefix, 2, torch::full({3}, t, torch::kLong));
        CHECK(st.position.eq(st.position[0]).all().item<bool>());
        continue;
      }
      // Padding in the prefix's padded columns must not matter: fill it with other tokens.
      torch::Tensor noisy = prefix.clone();
      for (int64_t b = 0; b < 3; ++b)
        if (lengths[b] < t) noisy[b].narrow(0, lengths[b], t - lengths[b]).fill_(7);
      // A small reserve: the caches grow after the prefill.
      InferenceState filled = m->prefill(batch.src, batch.src_mask, noisy, /*reserve=*/2, len);
      std::vector<torch::Tensor> got;
      for (int64_t i = 0; i < next.size(0); ++i) got.push_back(m->step(filled, next[i]));
      for (int64_t b = 0; b < 3; ++b) {
        TestBatch r = batch.row(b);
        InferenceState alone = m->start(r.src, r.src_mask, /*reserve=*/2);
        for (int64_t j = 0; j < lengths[b]; ++j) m->step(alone, prefix[b].narrow(0, j, 1));
        for (int64_t i = 0; i < next.size(0); ++i) {
          torch::Tensor want = m->step(alone, next[i].narrow(0, b, 1));
          INFO("row " << b << ", step " << i << " after its prefix");
          CHECK(rel_err(got[static_cast<size_t>(i)].narrow(0, b, 1), want) <= 1e-4);
        }
        CHECK(filled.position[b].item<int64_t>() == alone.position[0].item<int64_t>());
      }
    }
  }
}

TEST_CASE("prefill rejects lengths that do not fit its prefix", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3}, {2, 2});
  ModelPtr m = tiny_model(tiny_config("hybrid"), kVocab);
  torch::NoGradGuard no_grad;
  torch::Tensor prefix = torch::full({2, 3}, 2, torch::kLong);
  CHECK_THROWS_WITH(m->prefill(batch.src, batch.src_mask, prefix, 2, torch::tensor({1, 4}, torch::kLong)),
                    Catch::Contains("every length must be in [0, 3]"));
  CHECK_THROWS_WITH(m->prefill(batch.src, batch.src_mask, prefix, 2, torch::tensor({1}, torch::kLong)),
                    Catch::Contains("lengths must be (B) integers with B = 2"));
  CHECK_THROWS_WITH(m->prefill(batch.src, batch.src_mask, prefix, 2, torch::tensor({1.0, 2.0})),
                    Catch::Contains("lengths must be (B) integers"));
}

TEST_CASE("states of sources of different widths are not joined", "[models][state]") {
  ModelPtr m = tiny_model(tiny_config("hybrid"), kVocab);
  torch::NoGradGuard no_grad;
  TestBatch a = make_batch({3}, {2}), b = make_batch({5}, {2});
  CHECK_THROWS_WITH(InferenceState::cat({m->start(a.src, a.src_mask), m->start(b.src, b.src_mask)}),
                    Catch::Contains("cross-attention K of shape") && Catch::Contains("equal source lengths"));
}

TEST_CASE("a sequence gives the same logits alone and inside a padded batch", "[models][invariant]") {
  TestBatch batch = make_batch({4, 8, 2, 6}, {7, 3, 5, 1}, kVocab, 11);
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      torch::Tensor all = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      for (int64_t b = 0; b < batch.size(); ++b) {
        TestBatch r = batch.row(b);
        torch::Tensor alone = m->forward(r.src, r.src_mask, r.tgt_in, r.tgt_mask);
        INFO("row " << b);
        CHECK(rel_err(all[b].narrow(0, 0, batch.tgt_len[b]), alone[0]) <= 1e-5);
      }
    }
  }
}

TEST_CASE("padding on the left of the source changes nothing either", "[models][invariant]") {
  // The runtime gets right-padded batches, but the models accept any padding
  // and move it where each kind needs it.
  TestBatch batch = make_batch({3, 6}, {4, 4}, kVocab, 5);
  torch::Tensor left_src = torch::zeros_like(batch.src), left_mask = torch::zeros_like(batch.src_mask);
  for (int64_t b = 0; b < 2; ++b) {
    const int64_t n = batch.src_len[b], s = batch.src.size(1);
    left_src[b].narrow(0, s - n, n).copy_(batch.src[b].narrow(0, 0, n));
    left_mask[b].narrow(0, s - n, n).fill_(true);
  }
  for (const std::string kind : {"hybrid", "mamba", "decoder_only"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind));
      torch::NoGradGuard no_grad;
      torch::Tensor a = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      torch::Tensor b = m->forward(left_src, left_mask, batch.tgt_in, batch.tgt_mask);
      CHECK(rel_err(b, a) <= 1e-5);
    }
  }
}

TEST_CASE("every parameter receives a gradient", "[models][invariant]") {
  TestBatch batch = make_batch({5, 3}, {4, 6});
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra + "dropout = 0.1\nattn_dropout = 0.1\n"), kVocab,
                              v.boundary);
      m->train();
      torch::Tensor logits = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      torch::Tensor loss = torch::nn::functional::cross_entropy(
          logits.index({batch.tgt_mask}), batch.tgt_out.index({batch.tgt_mask}));
      loss.backward();
      int64_t checked = 0;
      for (const auto& p : m->named_parameters()) {
        INFO(p.key());
        REQUIRE(p.value().grad().defined());
        CHECK(p.value().grad().abs().sum().item<double>() > 0);
        CHECK(torch::isfinite(p.value().grad()).all().item<bool>());
        ++checked;
      }
      CHECK(checked > 10);
    }
  }
}

TEST_CASE("beam search with beam size 1 equals greedy search", "[models][search]") {
  // A small vocabulary makes eos likely, so some rows stop early.
  const int64_t vocab = 8;
  TestBatch batch = make_batch({4, 7, 2, 5}, {2, 2, 2, 2}, vocab, 21);
  for (const std::string kind : {"hybrid", "transformer", "mamba", "decoder_only", "retnet", "rnnsearch"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind), vocab);
      const auto greedy = check_beam_one_is_greedy(*m, batch);
      // Without compaction the rows stay in the batch; the results do not change.
      const auto fixed = check_beam_one_is_greedy(*m, batch, /*compact=*/false);
      for (size_t b = 0; b < 4; ++b) CHECK(fixed[b].tokens == greedy[b].tokens);
    }
  }
}

TEST_CASE("beam hypotheses score what forced decoding says", "[models][search]") {
  const int64_t vocab = 8;
  TestBatch batch = make_batch({4, 6, 3}, {2, 2, 2}, vocab, 4);
  for (const std::string kind : {"hybrid", "mamba", "retnet", "rnnsearch"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind), vocab);
      SearchOptions o;
      o.beam_size = 4;
      o.nbest = 3;
      o.max_len_a = 1.0;
      o.max_len_b = 3;
      o.length_penalty = 0.6;
      auto out = beam_search(*m, batch.src, batch.src_mask, o);
      REQUIRE(out.size() == 3);
      for (size_t b = 0; b < out.size(); ++b) {
        REQUIRE(!out[b].empty());
        CHECK(out[b].size() <= 3);
        for (size_t i = 1; i < out[b].size(); ++i) CHECK(out[b][i - 1].score >= out[b][i].score);
        for (const Hypothesis& h : out[b]) {
          // Score the hypothesis (plus its eos when finished) by forced decoding.
          const ForcedRow f = forced_row({}, h);
          const int64_t len = f.length;
          REQUIRE(len >= 1);
          TestBatch r = batch.row(static_cast<int64_t>(b));
          double lp = sequence_log_probs(*m, r.src, r.src_mask, f.in, f.out, f.mask).item<double>();
          CHECK(lp == Approx(h.log_prob).epsilon(1e-4));
          CHECK(h.score == Approx(h.log_prob / std::pow(static_cast<double>(len), 0.6)).epsilon(1e-9));
        }
      }
    }
  }
}

// The searches of evaluation under bf16 autocast (as on a GPU): beam search
// with compaction and state reorders, forced prefixes of different lengths
// (prefilled, then stepped), greedy search; none may meet a state of another
// dtype, and forced decoding scores the hypotheses as the search did, within
// bf16's precision.
TEST_CASE("under bf16 autocast the searches run and forced decoding agrees with them", "[models][search]") {
  const int64_t vocab = 8;
  TestBatch batch = make_batch({4, 6, 3}, {2, 2, 2}, vocab, 4);
  const Prefixes prefixes{{5, 6, 4}, {}, {7, 5, 5, 6, 4}};
  for (const std::string kind : {"hybrid", "transformer", "mamba", "decoder_only"}) {
    SECTION(kind) {
      ModelPtr m = tiny_model(tiny_config(kind), vocab);
      const core::Bf16Autocast autocast(c10::DeviceType::CPU);
      SearchOptions o;
      o.beam_size = 3;
      o.nbest = 2;
      o.max_len_a = 1.0;
      o.max_len_b = 3;
      auto beams = beam_search(*m, batch.src, batch.src_mask, o);
      auto prefixed = beam_search(*m, batch.src, batch.src_mask, o, prefixes);
      REQUIRE(beams.size() == 3);
      REQUIRE(prefixed.size() == 3);
      for (size_t b = 0; b < 3; ++b) {
        INFO("row " << b);
        REQUIRE(!beams[b].empty());
        REQUIRE(!prefixed[b].empty());
        TestBatch r = batch.row(static_cast<int64_t>(b));
        // Forced decoding of bos + prefix + output scores the output (and its
        // eos) after the prefix as the search did.
        for (const bool with_prefix : {false, true}) {
          INFO((with_prefix ? "after the forced prefix" : "no prefix"));
          const std::vector<int64_t> prefix = with_prefix ? prefixes[b] : std::vector<int64_t>{};
          const Hypothesis& h = with_prefix ? prefixed[b][0] : beams[b][0];
          const ForcedRow f = forced_row(prefix, h);
          const int64_t p = static_cast<int64_t>(prefix.size());
          torch::Tensor lp = token_log_probs(*m, r.src, r.src_mask, f.in, f.out, f.mask);
          CHECK(std::isfinite(h.log_prob));
          CHECK(lp.narrow(1, p, f.length - p).sum().item<double>() == Approx(h.log_prob).epsilon(0.05).margin(0.05));
        }
      }
      check_beam_one_is_greedy(*m, batch);
    }
  }
}

TEST_CASE("a forced target prefix is fed, not returned and not scored", "[models][search]") {
  const int64_t vocab = 8;  // eos is likely, so outputs end at different lengths
  TestBatch batch = make_batch({4, 6, 3}, {2, 2, 2}, vocab, 4);
  // Prefixes of different lengths in one batch: row 1 has none, or every row
  // has one (each row's whole prefix goes through one prefill, or, for
  // rnnsearch and with prefill_prefixes false, the common part, 2 tokens, and
  // then one step per token; the rows searched alone prefill their whole
  // prefix).
  for (const Prefixes& prefixes :
       {Prefixes{{5, 6, 4}, {}, {7, 5, 5, 6, 4}}, Prefixes{{5, 6, 4}, {6, 4}, {7, 5, 5, 6, 4}}})
  for (const std::string kind : {"hybrid", "transformer", "mamba", "decoder_only", "retnet", "rnnsearch"}) {
    SECTION(kind + (prefixes[1].empty() ? "" : ", every row with a prefix")) {
      ModelPtr m = tiny_model(tiny_config(kind), vocab);
      SearchOptions o;
      o.max_len_a = 1.0;
      o.max_len_b = 3;
      o.length_penalty = 0.6;
      for (int64_t beam : {1, 3}) {
        o.beam_size = beam;
        auto out = translate(*m, batch.src, batch.src_mask, o, prefixes);
        auto plain = translate(*m, batch.src, batch.src_mask, o);
        REQUIRE(out.size() == 3);
        // The prefixes in one prefill (where the kind can) or their common
        // part and then one step per token: the same hypotheses.
        SearchOptions stepped = o;
        stepped.prefill_prefixes = false;
        auto by_steps = translate(*m, batch.src, batch.src_mask, stepped, prefixes);
        REQUIRE(by_steps.size() == 3);
        for (size_t b = 0; b < out.size(); ++b) {
          INFO("beam " << beam << ", row " << b << ", prefixes stepped");
          CHECK(by_steps[b][0].tokens == out[b][0].tokens);
          CHECK(by_steps[b][0].finished == out[b][0].finished);
          CHECK(by_steps[b][0].log_prob == Approx(out[b][0].log_prob).epsilon(1e-5));
        }
        if (prefixes[1].empty()) {
          // No prefix: the same as a search without prefixes.
          CHECK(out[1][0].tokens == plain[1][0].tokens);
          CHECK(out[1][0].log_prob == Approx(plain[1][0].log_prob).epsilon(1e-6));
        }
        for (size_t b = 0; b < out.size(); ++b) {
          INFO("beam " << beam << ", row " << b);
          const Hypothesis& h = out[b][0];
          const auto& prefix = prefixes[b];
          // The same row searched alone gives the same hypothesis.
          TestBatch r = batch.row(static_cast<int64_t>(b));
          auto alone = translate(*m, r.src, r.src_mask, o, Prefixes{prefix});
          CHECK(alone[0][0].tokens == h.tokens);
          // The output's length limit counts from the end of the prefix.
          const int64_t out_len = static_cast<int64_t>(h.tokens.size()) + (h.finished ? 1 : 0);
          CHECK(out_len <= batch.src_len[b] + 3);
          // Forced decoding of bos + prefix + output: the log-probability of
          // the output (and its eos) after the prefix is the hypothesis's.
          const ForcedRow f = forced_row(prefix, h);
          const int64_t len = f.length;
          const int64_t p = static_cast<int64_t>(prefix.size());
          torch::Tensor lp = token_log_probs(*m, r.src, r.src_mask, f.in, f.out, f.mask);
          CHECK(lp.narrow(1, p, len - p).sum().item<double>() == Approx(h.log_prob).epsilon(1e-4));
          CHECK(h.score == Approx(h.log_prob / std::pow(static_cast<double>(len - p), 0.6)).epsilon(1e-9));
          if (beam == 1) {
            // Greedy: every output token is the argmax after the prefix and the tokens before it.
            torch::Tensor logits = m->forward(r.src, r.src_mask, f.in, f.mask);
            torch::Tensor best = logits.argmax(-1).squeeze(0);
            for (int64_t t = p; t < len; ++t) CHECK(best[t].item<int64_t>() == f.target[static_cast<size_t>(t)]);
          }
        }
      }
      // min_length counts output tokens, not prefix tokens.
      o.min_length = 3;
      o.max_len_b = 5;
      for (int64_t beam : {1, 3}) {
        o.beam_size = beam;
        for (const NBest& nb : translate(*m, batch.src, batch.src_mask, o, prefixes))
          CHECK(nb[0].tokens.size() >= 3);
      }
    }
  }
}

namespace {
// A model that counts the step() calls made on another.
class CountingModel : public TranslationModel {
 public:
  explicit CountingModel(ModelPtr inner)
      : TranslationModel(inner->kind(), inner->config(), inner->context(), inner->plan()), inner_(std::move(inner)) {
    register_module("inner", inner_);
  }
  torch::Tensor forward(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& tgt_in,
                        const torch::Tensor& tgt_mask) override {
    return inner_->forward(src, src_mask, tgt_in, tgt_mask);
  }
  InferenceState start(const torch::Tensor& src, const torch::Tensor& src_mask, int64_t reserve) override {
    return inner_->start(src, src_mask, reserve);
  }
  torch::Tensor step(InferenceState& state, const torch::Tensor& tokens) override {
    ++steps;
    return inner_->step(state, tokens);
  }
  InferenceState prefill(const torch::Tensor& src, const torch::Tensor& src_mask, const torch::Tensor& prefix,
                         int64_t reserve, const torch::Tensor& lengths) override {
    return inner_->prefill(src, src_mask, prefix, reserve, lengths);
  }
  bool prefills_ragged() const override { return inner_->prefills_ragged(); }
  int64_t decoder_parameter_count() const override { return inner_->decoder_parameter_count(); }
  int64_t steps = 0;

 private:
  ModelPtr inner_;
};
}  // namespace

TEST_CASE("forced prefixes of different lengths cost no steps where the kind prefills them", "[models][search]") {
  const int64_t vocab = 8;
  TestBatch batch = make_batch({4, 6, 3}, {2, 2, 2}, vocab, 4);
  const Prefixes prefixes{{5, 6, 4}, {6}, {7, 5, 5, 6, 4, 4, 6}};  // common part 1 token, longest 7
  for (const std::string kind : {"hybrid", "mamba", "rnnsearch"}) {
    SECTION(kind) {
      CountingModel m(tiny_model(tiny_config(kind), vocab));
      SearchOptions o;
      o.beam_size = 1;
      o.max_len_a = 1.0;
      o.max_len_b = 3;
      for (bool prefill : {true, false}) {
        o.prefill_prefixes = prefill;
        m.steps = 0;
        auto out = greedy_search(m, batch.src, batch.src_mask, o, prefixes);
        // Rows step together until the last one ends; a row fed by steps
        // needs one per prefix token past the common part first.
        const bool whole = prefill && kind != "rnnsearch";
        int64_t want = 0;
        for (size_t b = 0; b < out.size(); ++b) {
          const int64_t produced = static_cast<int64_t>(out[b].tokens.size()) + (out[b].finished ? 1 : 0);
          const int64_t fed = whole ? 0 : static_cast<int64_t>(prefixes[b].size()) - 1;
          want = std::max(want, fed + produced);
        }
        INFO("prefill_prefixes " << prefill);
        CHECK(m.steps == want);
      }
    }
  }
}

TEST_CASE("min_length forbids eos and the maximum length holds", "[models][search]") {
  const int64_t vocab = 6;  // eos is likely at every step
  TestBatch batch = make_batch({3, 5}, {2, 2}, vocab, 9);
  ModelPtr m = tiny_model(tiny_config("hybrid"), vocab);
  SearchOptions o;
  o.beam_size = 1;
  o.max_len_a = 0.0;
  o.max_len_b = 12;
  o.min_length = 12;
  auto out = greedy_search(*m, batch.src, batch.src_mask, o);
  for (const Hypothesis& h : out) {
    CHECK(h.tokens.size() == 12);
    CHECK(!h.finished);
  }
  o.max_length = 5;
  o.min_length = 0;
  o.beam_size = 3;
  for (const NBest& nb : translate(*m, batch.src, batch.src_mask, o))
    for (const Hypothesis& h : nb) CHECK(static_cast<int64_t>(h.tokens.size()) + (h.finished ? 1 : 0) <= 5);
}

TEST_CASE("reordering the state reorders the next logits", "[models][state]") {
  TestBatch batch = make_batch({4, 6, 3}, {3, 3, 3}, kVocab, 2);
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      InferenceState a = m->start(batch.src, batch.src_mask, 2);
      InferenceState b = m->start(batch.src, batch.src_mask, 2);
      for (int64_t t = 0; t < 2; ++t) {
        m->step(a, batch.tgt_in.select(1, t));
        m->step(b, batch.tgt_in.select(1, t));
      }
      // Duplicate row 2, drop row 0, swap: rows become [2, 1, 2].
      torch::Tensor index = torch::tensor(std::vector<int64_t>{2, 1, 2}, torch::kLong);
      b.reorder(index);
      torch::Tensor next = batch.tgt_in.select(1, 2);
      torch::Tensor la = m->step(a, next);
      torch::Tensor lb = m->step(b, next.index_select(0, index));
      CHECK(rel_err(lb, la.index_select(0, index)) <= 1e-6);
    }
  }
}

TEST_CASE("reorders in a row reuse their buffers and leave copies of the state alone", "[models][state]") {
  TestBatch batch = make_batch({4, 6, 3}, {6, 6, 6}, kVocab, 2);
  for (const KindVariant& v : model_variants()) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra), kVocab, v.boundary);
      torch::NoGradGuard no_grad;
      InferenceState a = m->start(batch.src, batch.src_mask, 2);  // never reordered
      InferenceState b = m->start(batch.src, batch.src_mask, 2);
      std::vector<int64_t> map{0, 1, 2};  // b's row r holds a's row map[r]
      auto step_all = [&](InferenceState& s, const std::vector<int64_t>& rows, const torch::Tensor& la, int64_t t) {
        const torch::Tensor idx = torch::tensor(rows, torch::kLong);
        return rel_err(m->step(s, batch.tgt_in.select(1, t).index_select(0, idx)), la.index_select(0, idx));
      };
      m->step(a, batch.tgt_in.select(1, 0));
      m->step(b, batch.tgt_in.select(1, 0));
      // Same-size reorders (a cycle, a duplicate, the identity), some with a
      // copy of the state taken before: the copy keeps its rows.
      const std::vector<std::vector<int64_t>> perms{{2, 1, 2}, {1, 2, 0}, {0, 0, 1}, {0, 1, 2}, {2, 0, 1}};
      std::optional<InferenceState> snap;
      std::vector<int64_t> snap_map;
      for (size_t p = 0; p < perms.size(); ++p) {
        if (p == 2) {
          snap = b;
          snap_map = map;
        }
        b.reorder(torch::tensor(perms[p], torch::kLong), /*same_sources=*/false);
        std::vector<int64_t> next(3);
        for (size_t r = 0; r < 3; ++r) next[r] = map[static_cast<size_t>(perms[p][r])];
        map = next;
        const int64_t t = static_cast<int64_t>(p) + 1;
        torch::Tensor la = m->step(a, batch.tgt_in.select(1, t));
        INFO("reorder " << p);
        CHECK(step_all(b, map, la, t) <= 1e-6);
        if (snap) CHECK(step_all(*snap, snap_map, la, t) <= 1e-6);
      }
    }
  }
}

TEST_CASE("long sequences: decoding equals teacher forcing across scan chunks and cache growth",
          "[models][invariant]") {
  // Longer than the SSD kernel's blocks, the KV reserve and the sliding window.
  TestBatch batch = make_batch({37, 20}, {70, 45}, kVocab, 8);
  const std::vector<KindVariant> kinds = {
      {"hybrid", "hybrid", "cross_attn = \"local\"\ncross_attn_window = 8\n"},
      {"mamba", "mamba", ""},
      {"decoder_only local", "decoder_only", "attention_ratio = 0.5\nattn_window = 16\n"},
      // Far beyond retention's fastest decay horizon (1/(1-gamma_0) = 32 tokens).
      {"retnet", "retnet", "n_heads = 4\n"},
      {"rnnsearch", "rnnsearch", ""},
  };
  for (const KindVariant& v : kinds) {
    SECTION(v.name) {
      ModelPtr m = tiny_model(tiny_config(v.kind, v.extra));
      torch::NoGradGuard no_grad;
      torch::Tensor forced = m->forward(batch.src, batch.src_mask, batch.tgt_in, batch.tgt_mask);
      InferenceState st = m->start(batch.src, batch.src_mask, 8);
      double worst = 0;
      for (int64_t t = 0; t < batch.tgt_in.size(1); ++t) {
        torch::Tensor step = m->step(st, batch.tgt_in.select(1, t));
        torch::Tensor real = batch.tgt_mask.select(1, t);
        worst = std::max(worst, rel_err(step.index({real}), forced.select(1, t).index({real})));
      }
      CHECK(worst <= 1e-4);
    }
  }
}
