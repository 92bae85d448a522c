// Document translation one sentence at a time (eval.doc_decode = "sentences"):
// each sentence after its document's preceding source sentences, with the
// model's own translations of them forced as the target prefix.
#include <catch2/catch.hpp>

#include <algorithm>

#include "core/error.h"
#include "data/synthetic.h"
#include "data/tokenizer.h"
#include "test_util.h"
#include "train/evaluate.h"
#include "train_helpers.h"
#include "data/examples.h"
#include "models/model_helpers.h"
#include "train/decode.h"

using namespace mambamt;
using namespace mambamt::models;
using namespace mambamt::models::test;

namespace {

constexpr int64_t kSmallVocab = 12;

// Document d, sentence j: a source of 2 + (d + j) % 3 ids from [5, kSmallVocab).
data::TokenizedCorpus small_corpus(const std::vector<int>& sentences) {
  data::TokenizedCorpus c;
  for (size_t d = 0; d < sentences.size(); ++d) {
    data::TokenizedDocument doc;
    for (int j = 0; j < sentences[d]; ++j) {
      data::TokenizedSentence s;
      for (int k = 0; k < 2 + static_cast<int>(d + static_cast<size_t>(j)) % 3; ++k)
        s.src.push_back(static_cast<int32_t>(5 + (7 * d + 3 * static_cast<size_t>(j) + static_cast<size_t>(k)) % 7));
      s.tgt = s.src;
      doc.sentences.push_back(s);
    }
    c.documents.push_back(doc);
  }
  return c;
}

std::vector<int32_t> joined(const std::vector<std::vector<int32_t>>& parts, int32_t sep) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out.push_back(sep);
    out.insert(out.end(), parts[i].begin(), parts[i].end());
  }
  return out;
}

}  // namespace

TEST_CASE("in-context translation: each sentence after its own earlier translations", "[train][decode]") {
  ModelPtr m = tiny_model(tiny_config("hybrid"), kSmallVocab);
  const data::SpecialIds ids;
  const data::TokenizedCorpus corpus = small_corpus({3, 2});
  data::ExampleOptions eo;  // single sentences
  const auto examples = data::make_examples(corpus, eo, ids.sep);
  REQUIRE(examples.size() == 5);
  models::SearchOptions so;
  so.beam_size = 2;
  so.max_len_a = 1.0;
  so.max_len_b = 2;
  const torch::Device cpu(torch::kCPU);

  // One sentence by hand: its source after the context sources, the context
  // translations forced; the output cut at a <sep>.
  auto by_hand = [&](const std::vector<int32_t>& src, const std::vector<int64_t>& prefix) {
    data::Example e;
    e.src = src;
    const models::Prefixes p{prefix};
    auto h = train::translate_examples(*m, {e}, ids, so, 1000, cpu, false, nullptr, &p)[0];
    h.erase(std::find(h.begin(), h.end(), static_cast<int64_t>(ids.sep)), h.end());
    return h;
  };
  auto src = [&](size_t d, size_t j) { return corpus.documents[d].sentences[j].src; };
  auto with_sep = [&](std::vector<int64_t> h) {
    h.push_back(ids.sep);
    return h;
  };

  SECTION("one sentence of context") {
    const auto got = train::translate_in_context(*m, corpus, examples, 1, 100, ids, so, 1000, cpu);
    REQUIRE(got.size() == 5);
    const auto h00 = by_hand(src(0, 0), {});
    const auto h01 = by_hand(joined({src(0, 0), src(0, 1)}, ids.sep), with_sep(h00));
    const auto h02 = by_hand(joined({src(0, 1), src(0, 2)}, ids.sep), with_sep(h01));
    const auto h10 = by_hand(src(1, 0), {});
    const auto h11 = by_hand(joined({src(1, 0), src(1, 1)}, ids.sep), with_sep(h10));
    CHECK(got[0] == h00);
    CHECK(got[1] == h01);
    CHECK(got[2] == h02);
    CHECK(got[3] == h10);
    CHECK(got[4] == h11);
    for (auto& h : got) CHECK(std::find(h.begin(), h.end(), static_cast<int64_t>(ids.sep)) == h.end());

    // Only the last sentence asked for: its document is still translated from
    // the start, so the result is the same.
    const auto last = train::translate_in_context(*m, corpus, {examples[2]}, 1, 100, ids, so, 1000, cpu);
    REQUIRE(last.size() == 1);
    CHECK(last[0] == h02);
  }

  SECTION("two sentences of context, newest first within the budget") {
    const auto got = train::translate_in_context(*m, corpus, examples, 2, 100, ids, so, 1000, cpu);
    const auto h00 = by_hand(src(0, 0), {});
    const auto h01 = by_hand(joined({src(0, 0), src(0, 1)}, ids.sep), with_sep(h00));
    auto prefix = with_sep(h00);
    for (auto t : with_sep(h01)) prefix.push_back(t);
    CHECK(got[2] == by_hand(joined({src(0, 0), src(0, 1), src(0, 2)}, ids.sep), prefix));

    // A budget that holds sentence 2 of document 0 with one context sentence
    // but not two. Sentence 2 (4 ids) after sentence 1 (3 ids): source 3 + sep
    // + 4 + eos = 9; target bos + h01 + sep + 4 (the stand-in for its own
    // translation) + eos. Sentence 1 keeps its one sentence of context (target
    // bos + h00 + sep + 3 + eos); a second one for sentence 2 would add h00 +
    // sep to its target, past the budget.
    REQUIRE(src(0, 1).size() == 3);
    REQUIRE(src(0, 2).size() == 4);
    const int64_t tight = std::max({int64_t{9}, static_cast<int64_t>(h01.size()) + 7, static_cast<int64_t>(h00.size()) + 6});
    const auto cut = train::translate_in_context(*m, corpus, examples, 2, tight, ids, so, 1000, cpu);
    CHECK(cut[0] == h00);
    REQUIRE(cut[1] == h01);
    CHECK(cut[2] == by_hand(joined({src(0, 1), src(0, 2)}, ids.sep), with_sep(h01)));
  }

  SECTION("no context: every sentence translated alone") {
    const auto got = train::translate_in_context(*m, corpus, examples, 0, 100, ids, so, 1000, cpu);
    for (size_t i = 0; i < examples.size(); ++i) CHECK(got[i] == by_hand(examples[i].src, {}));
  }

  SECTION("windows are rejected") {
    data::ExampleOptions w;
    w.context_sentences = 2;
    const auto windows = data::make_examples(corpus, w, ids.sep);
    CHECK_THROWS_WITH(train::translate_in_context(*m, corpus, windows, 1, 100, ids, so, 1000, cpu),
                      Catch::Contains("is not a single sentence"));
  }
}

// contrastive_scores against scores built by hand: each candidate after its
// context (source sentences joined by <sep>; with context on both sides,
// their reference translations and a <sep> as the target prefix), summing
// the log-probabilities of the candidate's tokens and the eos only.
TEST_CASE("contrastive scores are the forced-decoding scores of each candidate in its context", "[train][decode]") {
  TempDir tmp;
  data::SyntheticOptions so;
  so.train_docs = 60;
  so.valid_docs = 1;
  so.test_docs = 1;
  const data::SyntheticCorpus synth = data::generate_synthetic(so);
  data::TokenizerOptions to;
  to.vocab_size = 200;
  to.languages = {"src", "tgt"};
  const data::Tokenizer tok = data::Tokenizer::train(synth.train, to, tmp.path("tok"));
  ModelPtr m = tiny_model(tiny_config("hybrid"), tok.vocab_size());
  const data::SpecialIds ids = tok.specials();
  const torch::Device cpu(torch::kCPU);

  data::ContrastiveExample ex;
  ex.doc_id = "d";
  ex.sentence = 4;
  ex.label = "hen";
  ex.distance = 2;
  ex.src_context = {"ul pa ta nafo .", "en ta lupa .", "ul zemo ta sisu ."};
  ex.tgt_context = {"hen rom kleir .", "un koek drytdoeto .", "hen ram freim ."};
  ex.source = "ul pa vipu ta nafo .";
  ex.reference = "hen rom kleir plarek .";
  ex.contrastive = {"sye rom kleir plarek .", "dit rom kleir plarek ."};

  auto enc = [&](const std::string& s) {
    auto v = tok.encode(s);
    return std::vector<int64_t>(v.begin(), v.end());
  };
  // log p(candidate + eos | src, bos + prefix) by hand.
  auto by_hand = [&](const std::vector<int64_t>& src, const std::vector<int64_t>& prefix, const std::string& cand) {
    std::vector<int64_t> s = src, in{ids.bos}, out = prefix;
    s.push_back(ids.eos);
    in.insert(in.end(), prefix.begin(), prefix.end());
    const auto c = enc(cand);
    in.insert(in.end(), c.begin(), c.end());
    out.insert(out.end(), c.begin(), c.end());
    out.push_back(ids.eos);
    const int64_t n = static_cast<int64_t>(out.size()), p = static_cast<int64_t>(prefix.size());
    torch::Tensor st = torch::tensor(s, torch::kLong).view({1, -1});
    torch::Tensor lp = models::token_log_probs(*m, st, torch::ones_like(st, torch::kBool),
                                               torch::tensor(in, torch::kLong).view({1, n}),
                                               torch::tensor(out, torch::kLong).view({1, n}),
                                               torch::ones({1, n}, torch::kBool));
    return lp.narrow(1, p, n - p).sum().item<double>();
  };
  auto joined_text = [&](const std::vector<std::string>& parts, bool trailing_sep) {
    std::vector<int64_t> out;
    for (size_t i = 0; i < parts.size(); ++i) {
      if (i > 0) out.push_back(ids.sep);
      const auto e = enc(parts[i]);
      out.insert(out.end(), e.begin(), e.end());
    }
    if (trailing_sep && !parts.empty()) out.push_back(ids.sep);
    return out;
  };
  auto check = [&](const core::ExperimentConfig& c, const std::vector<int64_t>& src,
                   const std::vector<int64_t>& prefix) {
    const auto got = train::contrastive_scores(*m, c, tok, {ex}, cpu);
    REQUIRE(got.size() == 1);
    CHECK(got[0].label == "hen");
    CHECK(got[0].distance == 2);
    CHECK(got[0].reference == Approx(by_hand(src, prefix, ex.reference)).epsilon(1e-5));
    REQUIRE(got[0].contrastive.size() == 2);
    for (size_t k = 0; k < 2; ++k)
      CHECK(got[0].contrastive[k] == Approx(by_hand(src, prefix, ex.contrastive[k])).epsilon(1e-5));
  };

  SECTION("windows of 3: two context sentences on both sides") {
    const auto c = train_test::tiny_config({{"data.context_sentences", "3"}, {"data.max_example_tokens", "64"}});
    auto src = joined_text({ex.src_context[1], ex.src_context[2], ex.source}, false);
    check(c, src, joined_text({ex.tgt_context[1], ex.tgt_context[2]}, true));
  }
  SECTION("source-side context: no target prefix") {
    const auto c = train_test::tiny_config(
        {{"data.context_sentences", "3"}, {"data.context_side", "\"source\""}, {"data.max_example_tokens", "64"}});
    check(c, joined_text({ex.src_context[1], ex.src_context[2], ex.source}, false), {});
  }
  SECTION("single sentences: no context") {
    const auto c = train_test::tiny_config({{"data.context_sentences", "0"}});
    check(c, enc(ex.source), {});
  }
  SECTION("the budget keeps the newest context sentences that fit") {
    // Exactly the room for the source, the longest candidate and one context
    // sentence on the side that needs more; a second one does not fit there.
    size_t longest = enc(ex.reference).size();
    for (auto& v : ex.contrastive) longest = std::max(longest, enc(v).size());
    const int64_t one = static_cast<int64_t>(std::max(enc(ex.source).size() + enc(ex.src_context[2]).size(),
                                                      longest + enc(ex.tgt_context[2]).size())) + 2;
    const int64_t two = static_cast<int64_t>(std::min(enc(ex.src_context[1]).size(), enc(ex.tgt_context[1]).size())) + 1;
    REQUIRE(two > 1);
    const auto c = train_test::tiny_config(
        {{"data.context_sentences", "3"}, {"data.max_example_tokens", std::to_string(one + two - 1)}});
    check(c, joined_text({ex.src_context[2], ex.source}, false), joined_text({ex.tgt_context[2]}, true));
  }
}
