// Documents -> examples: sentence windows, CAT-N statistics, validation
// passages and the length-extrapolation set.
#include <catch2/catch.hpp>

#include <map>
#include <numeric>

#include "data/detail/rng.h"
#include "data/examples.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;

namespace {

constexpr int32_t kSep = 4;

// Sentence j of document d has src ids {100*d + j, ...} of the given length.
TokenizedCorpus corpus_with(const std::vector<std::vector<int>>& lengths) {
  TokenizedCorpus c;
  for (size_t d = 0; d < lengths.size(); ++d) {
    TokenizedDocument doc;
    for (size_t j = 0; j < lengths[d].size(); ++j) {
      TokenizedSentence s;
      s.src.assign(static_cast<size_t>(lengths[d][j]), static_cast<int32_t>(1000 * d + 10 * j + 7));
      s.tgt.assign(static_cast<size_t>(lengths[d][j] + 1), static_cast<int32_t>(1000 * d + 10 * j + 8));
      doc.sentences.push_back(s);
    }
    c.documents.push_back(doc);
  }
  return c;
}

TokenizedCorpus random_corpus(int docs, uint64_t seed) {
  mambamt::data::detail::Rng rng(seed);
  std::vector<std::vector<int>> lengths;
  for (int d = 0; d < docs; ++d) {
    std::vector<int> doc;
    const int n = static_cast<int>(rng.between(3, 8));
    for (int j = 0; j < n; ++j) doc.push_back(static_cast<int>(rng.between(4, 20)));
    lengths.push_back(doc);
  }
  return corpus_with(lengths);
}

}  // namespace

TEST_CASE("single-sentence examples keep their provenance, and too long ones are dropped") {
  const TokenizedCorpus c = corpus_with({{3, 4, 50, 2}, {5}});
  ExampleStats st;
  ExampleOptions o;
  o.max_tokens = 10;
  const auto ex = make_examples(c, o, kSep, &st);
  CHECK(st.dropped_sentences == 1);
  REQUIRE(ex.size() == 4);
  CHECK(ex[2].spans[0].doc == 0);
  CHECK(ex[2].spans[0].first == 3);
  CHECK(ex[3].spans[0].doc == 1);
  CHECK(ex[0].src == c.documents[0].sentences[0].src);
  CHECK(ex[0].src_len() == 4);
  CHECK(ex[0].tgt_len() == 5);
  for (const auto& e : ex) CHECK(e.sentences() == 1);
}

TEST_CASE("document windows join consecutive sentences with the separator up to the budget") {
  const TokenizedCorpus c = corpus_with({{3, 3, 3, 3, 3}, {2, 2}});
  ExampleOptions o;
  o.context_sentences = 3;
  o.max_tokens = 100;
  auto ex = make_examples(c, o, kSep);
  REQUIRE(ex.size() == 3);
  CHECK(ex[0].sentences() == 3);
  CHECK(ex[1].sentences() == 2);
  CHECK(ex[1].spans[0].first == 3);
  CHECK(ex[2].sentences() == 2);
  // 3 + sep + 3 + sep + 3
  REQUIRE(ex[0].src.size() == 11);
  CHECK(ex[0].src[3] == kSep);
  CHECK(ex[0].src[7] == kSep);
  CHECK(ex[0].tgt[4] == kSep);

  // A budget of 10 fits two sentences (src 3 + sep + 3 + eos = 8, bos + 4 + sep + 4 = 10), not three.
  o.max_tokens = 10;
  ex = make_examples(c, o, kSep);
  for (const auto& e : ex) {
    CHECK(e.src_len() <= 10);
    CHECK(e.tgt_len() <= 10);
  }
  CHECK(ex[0].sentences() == 2);

  // Sliding windows: one starting at every sentence until a window reaches the end.
  o.max_tokens = 100;
  o.stride = 1;
  ex = make_examples(c, o, kSep);
  REQUIRE(ex.size() == 4);  // doc 0: starts 0, 1, 2 (reaches the end); doc 1: start 0
  CHECK(ex[1].spans[0].first == 1);
  CHECK(ex[2].spans[0].first == 2);
  CHECK(ex[2].sentences() == 3);
}

TEST_CASE("multi-resolution windows: every document split at each window size from 1 to the context size") {
  const TokenizedCorpus c = corpus_with({{3, 3, 3, 3, 3}, {2, 2}});
  ExampleOptions o;
  o.context_sentences = 3;
  o.max_tokens = 100;
  o.multi_resolution = true;
  o.stride = 1;  // unused with multi_resolution
  auto ex = make_examples(c, o, kSep);
  // Document 0: sizes 1 (5 windows), 2 (2+2+1), 3 (3+2); document 1: 1 (2), 2 (1), 3 (1).
  const std::vector<std::pair<int32_t, int32_t>> want = {{0, 1}, {1, 1}, {2, 1}, {3, 1}, {4, 1}, {0, 2}, {2, 2},
                                                         {4, 1}, {0, 3}, {3, 2}, {0, 1}, {1, 1}, {0, 2}, {0, 2}};
  REQUIRE(ex.size() == want.size());
  std::map<std::pair<int32_t, int32_t>, int> seen;  // (doc, sentence) -> examples holding it
  for (size_t i = 0; i < ex.size(); ++i) {
    CAPTURE(i);
    REQUIRE(ex[i].spans.size() == 1);
    CHECK(ex[i].spans[0].doc == (i < 10 ? 0 : 1));
    CHECK(ex[i].spans[0].first == want[i].first);
    CHECK(ex[i].spans[0].count == want[i].second);
    CHECK(ex[i].context == 0);
    const int64_t len = i < 10 ? 3 : 2;  // sentence length of the document
    CHECK(ex[i].src_len() == (len + 1) * want[i].second);  // each sentence and a sep (the last one's is the eos)
    for (int32_t j = 0; j < ex[i].spans[0].count; ++j) ++seen[{ex[i].spans[0].doc, ex[i].spans[0].first + j}];
  }
  // Each sentence is in one example per size: alone, in a 2- and in a
  // 3-window (document 1's 2- and 3-windows are the same pair).
  for (auto& [key, n] : seen) CHECK(n == 3);
  // The budget still bounds every window: 2 sentences fit 10 tokens, 3 do not.
  o.max_tokens = 10;
  for (const auto& e : make_examples(c, o, kSep)) {
    CHECK(e.src_len() <= 10);
    CHECK(e.tgt_len() <= 10);
  }
}

TEST_CASE("source-side context: every sentence is an example, its preceding source sentences as context") {
  const TokenizedCorpus c = corpus_with({{3, 3, 3, 3, 3}, {2, 2}});
  ExampleOptions o;
  o.context_sentences = 3;
  o.max_tokens = 100;
  o.source_context = true;
  auto ex = make_examples(c, o, kSep);
  REQUIRE(ex.size() == 7);
  // Document 0: contexts 0, 1, 2, 2, 2; document 1: 0, 1.
  const int32_t contexts[] = {0, 1, 2, 2, 2, 0, 1};
  for (size_t i = 0; i < ex.size(); ++i) {
    CAPTURE(i);
    CHECK(ex[i].context == contexts[i]);
    CHECK(ex[i].sentences() == contexts[i] + 1);
    // The target is the last sentence alone.
    const size_t d = i < 5 ? 0 : 1, j = i < 5 ? i : i - 5;
    CHECK(ex[i].tgt == c.documents[d].sentences[j].tgt);
    REQUIRE(ex[i].spans.size() == 1);
    CHECK(ex[i].spans[0].first + ex[i].spans[0].count == static_cast<int32_t>(j) + 1);
  }
  // Sentences 1, 2, 3 of document 0, joined by the separator.
  REQUIRE(ex[3].src.size() == 11);
  CHECK(ex[3].src[0] == 17);
  CHECK(ex[3].src[3] == kSep);
  CHECK(ex[3].src[4] == 27);
  CHECK(ex[3].src[7] == kSep);
  CHECK(ex[3].src[8] == 37);

  // The budget limits the source only: src 3 + sep + 3 + eos = 8 fits 8, a
  // third sentence does not; the target (4 + bos) is far inside it.
  o.max_tokens = 8;
  ex = make_examples(c, o, kSep);
  REQUIRE(ex.size() == 7);
  for (const auto& e : ex) {
    CHECK(e.src_len() <= 8);
    CHECK(e.context <= 1);
  }
  CHECK(ex[4].context == 1);
}

TEST_CASE("CAT-N: half the samples become concatenations of N samples") {
  const TokenizedCorpus c = random_corpus(3000, 5);
  const auto base = make_examples(c, ExampleOptions{}, kSep);
  REQUIRE(base.size() > 10000);
  double base_len = 0;
  for (const auto& e : base) base_len += static_cast<double>(e.src.size());
  base_len /= static_cast<double>(base.size());

  for (int64_t n : {5, 10}) {
    CatNOptions o;
    o.n = n;
    o.max_tokens = 100000;
    CatNStats st;
    const auto ex = apply_cat_n(base, o, kSep, 7, 0, &st);
    REQUIRE(ex.size() == base.size());
    const double frac = static_cast<double>(st.concatenated) / static_cast<double>(ex.size());
    INFO("N = " << n << ", concatenated fraction " << frac);
    CHECK(frac > 0.48);
    CHECK(frac < 0.52);
    CHECK(st.truncated == 0);
    // Length distribution: singles are the base examples; concatenations hold
    // exactly N samples, N - 1 separators, and on average N times the length.
    std::map<int64_t, int64_t> by_sentences;
    double cat_len = 0;
    for (size_t i = 0; i < ex.size(); ++i) {
      ++by_sentences[ex[i].sentences()];
      if (ex[i].sentences() == 1) {
        CHECK(ex[i].src == base[i].src);
        continue;
      }
      // The replaced sample leads its concatenation.
      CHECK(std::equal(base[i].src.begin(), base[i].src.end(), ex[i].src.begin()));
      CHECK(std::count(ex[i].src.begin(), ex[i].src.end(), kSep) == n - 1);
      CHECK(std::count(ex[i].tgt.begin(), ex[i].tgt.end(), kSep) == n - 1);
      cat_len += static_cast<double>(ex[i].src.size() - static_cast<size_t>(n - 1));
    }
    CHECK(by_sentences.size() == 2);
    CHECK(by_sentences[n] == st.concatenated);
    cat_len /= static_cast<double>(st.concatenated);
    CHECK(cat_len == Approx(static_cast<double>(n) * base_len).epsilon(0.03));

    // A pure function of (seed, epoch); redrawn every epoch.
    const auto again = apply_cat_n(base, o, kSep, 7, 0);
    const auto next = apply_cat_n(base, o, kSep, 7, 1);
    bool same = true, differs = false;
    for (size_t i = 0; i < ex.size(); ++i) {
      same = same && ex[i].src == again[i].src;
      differs = differs || ex[i].src != next[i].src;
    }
    CHECK(same);
    CHECK(differs);
  }

  // N = 1 is off.
  CatNOptions off;
  const auto ex = apply_cat_n(base, off, kSep, 7, 0);
  for (size_t i = 0; i < ex.size(); ++i) REQUIRE(ex[i].src == base[i].src);

  // The budget cuts concatenations short, never over it.
  CatNOptions tight;
  tight.n = 10;
  tight.max_tokens = 40;
  CatNStats st;
  for (const auto& e : apply_cat_n(base, tight, kSep, 7, 0, &st)) {
    CHECK(e.src_len() <= 40);
    CHECK(e.tgt_len() <= 40);
  }
  CHECK(st.truncated > 0);
}

TEST_CASE("validation passages of 1-10 sentences cover each document in order") {
  const TokenizedCorpus c = random_corpus(400, 9);
  const auto passages = validation_passages(c, 10, kSep, 3);
  std::map<int64_t, int64_t> lengths;
  std::vector<int32_t> next(c.documents.size(), 0);
  for (const auto& p : passages) {
    REQUIRE(p.spans.size() == 1);
    const Span& s = p.spans[0];
    CHECK(s.first == next[static_cast<size_t>(s.doc)]);
    next[static_cast<size_t>(s.doc)] += s.count;
    CHECK(s.count >= 1);
    CHECK(s.count <= 10);
    ++lengths[s.count];
    CHECK(std::count(p.src.begin(), p.src.end(), kSep) == s.count - 1);
  }
  for (size_t d = 0; d < c.documents.size(); ++d) CHECK(next[d] == static_cast<int32_t>(c.documents[d].sentences.size()));
  CHECK(lengths.size() >= 8);  // documents have 3-8 sentences, so 9 and 10 are rare
  CHECK(validation_passages(c, 10, kSep, 3).size() == passages.size());
}

TEST_CASE("length-extrapolation passages are 2x and 4x the longest training example") {
  const TokenizedCorpus train = random_corpus(200, 1);
  const TokenizedCorpus test = random_corpus(100, 2);
  const auto examples = make_examples(train, ExampleOptions{}, kSep);
  const int64_t longest = longest_source(examples);
  REQUIRE(longest == 21);
  for (int64_t factor : {2, 4}) {
    const auto passages = extrapolation_passages(test, factor * longest, kSep);
    REQUIRE(passages.size() > 10);
    int32_t doc = 0, sent = 0;  // passages are consecutive and disjoint
    for (const auto& p : passages) {
      CHECK(p.src_len() >= factor * longest);
      for (const auto& s : p.spans) {
        if (s.doc != doc) {
          CHECK(s.doc == doc + 1);
          CHECK(sent == static_cast<int32_t>(test.documents[static_cast<size_t>(doc)].sentences.size()));
          doc = s.doc;
          sent = 0;
        }
        CHECK(s.first == sent);
        sent += s.count;
      }
    }
  }
  CHECK(extrapolation_passages(test, 2 * longest, kSep, 5).size() == 5);
}

TEST_CASE("example text comes back from the corpus") {
  Corpus c;
  c.documents.push_back({"a", {{"s1", "t1", 1}, {"s2", "t2", 2}}});
  c.documents.push_back({"b", {{"s3", "t3", 1}}});
  Example e;
  e.spans = {{0, 0, 2}, {1, 0, 1}};
  CHECK(source_text(c, e) == "s1 s2 s3");
  CHECK(target_text(c, e, " | ") == "t1 | t2 | t3");
  // Source-side context is input, not text to translate or reference.
  Example with_context;
  with_context.spans = {{0, 0, 2}};
  with_context.context = 1;
  CHECK(source_text(c, with_context) == "s2");
  CHECK(target_text(c, with_context) == "t2");
}
