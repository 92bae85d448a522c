// Gold word alignments: the Pharaoh-format reader and writer, their checks
// against a test set, the synthetic corpus's alignments (every word linked to
// the word it translates), and the token-to-word map of the tokenizer.
#include <catch2/catch.hpp>

#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include "data/alignment.h"
#include "data/detail/text.h"
#include "data/synthetic.h"
#include "data/tokenizer.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

SyntheticOptions small_options() {
  SyntheticOptions o;
  o.train_docs = 300;
  o.valid_docs = 5;
  o.test_docs = 40;
  return o;
}

}  // namespace

TEST_CASE("alignment lines: sure and possible links, read back as written") {
  const WordAlignment a = parse_alignment("0-0 2-1  1?3\t4-4");
  REQUIRE(a.size() == 4);
  CHECK(a[0] == WordLink{0, 0, true});
  CHECK(a[1] == WordLink{2, 1, true});
  CHECK(a[2] == WordLink{1, 3, false});
  CHECK(a[3] == WordLink{4, 4, true});
  CHECK(format_alignment(a) == "0-0 2-1 1?3 4-4");
  CHECK(parse_alignment("   ").empty());

  ScratchDir d;
  const std::vector<WordAlignment> lines = {a, {}, {{3, 0, true}}};
  write_alignments(lines, d.path("set.align"));
  CHECK(slurp(d.path("set.align")) == "0-0 2-1 1?3 4-4\n\n3-0\n");
  CHECK(read_alignments(d.path("set.align")) == lines);
}

TEST_CASE("a malformed alignment line names the file, line and column") {
  ScratchDir d;
  write_file(d.path("bad.align"), "0-0 1-1\n0-0 1x2\n");
  const std::string msg = input_error([&] { read_alignments(d.path("bad.align")); });
  CHECK_THAT(msg, Contains(place(d.path("bad.align"), 2) + "5") && Contains("'1x2'"));
  write_file(d.path("twice.align"), "0-1 2-2 0?1\n");
  CHECK_THAT(input_error([&] { read_alignments(d.path("twice.align")); }),
             Contains(place(d.path("twice.align"), 1)) && Contains("given twice"));
  for (const char* bad : {"-1-2", "1-", "a-b", "1-2-3", "1--2"})
    CHECK_THAT(input_error([&] { parse_alignment(bad, "f.align", 7); }), Contains("f.align:7:1"));
}

TEST_CASE("alignments must fit the test set: one line per sentence, links inside their sentence") {
  Corpus c;
  c.documents.push_back({"d1", {{"a b c", "x y", 1}, {"a", "x", 2}}});
  c.documents.push_back({"d2", {{"p q", "r s t", 1}}});
  const std::vector<WordAlignment> good = {{{0, 0, true}, {2, 1, false}}, {{0, 0, true}}, {{1, 2, true}}};
  const auto shaped = alignments_for(c, good, "t.align");
  REQUIRE(shaped.size() == 2);
  REQUIRE(shaped[0].size() == 2);
  REQUIRE(shaped[1].size() == 1);
  CHECK(shaped[1][0] == good[2]);

  CHECK_THAT(input_error([&] { alignments_for(c, {good[0], good[1]}, "t.align"); }),
             Contains("t.align:3") && Contains("2 alignment lines for a test set of 3 sentences"));
  std::vector<WordAlignment> outside = good;
  outside[2].push_back({2, 0, true});  // d2 has 2 source words
  CHECK_THAT(input_error([&] { alignments_for(c, outside, "t.align"); }),
             Contains("t.align:3") && Contains("link 2-0") && Contains("document d2"));
  // With the corpus's file given, the error names it too.
  CHECK_THAT(input_error([&] { alignments_for(c, {good[0]}, "t.align", "sets/t.tsv"); }),
             Contains("t.align:2") && Contains("3 sentences of sets/t.tsv"));
  CHECK_THAT(input_error([&] { alignments_for(c, outside, "t.align", "sets/t.tsv"); }),
             Contains("document d2 of sets/t.tsv"));
}

TEST_CASE("synthetic gold alignments link every word to the word it translates") {
  const SyntheticCorpus c = generate_synthetic(small_options());
  REQUIRE(static_cast<int64_t>(c.test_alignments.size()) == c.test.num_sentences());
  const SyntheticLexicon& lex = c.lexicon;
  std::set<std::string> tgt_pronouns;
  for (int g = 0; g < 3; ++g) {
    tgt_pronouns.insert(lex.subject_pronouns[static_cast<size_t>(g)]);
    tgt_pronouns.insert(lex.object_pronouns[static_cast<size_t>(g)]);
  }
  size_t k = 0, pronouns = 0, reordered = 0, past_verbs = 0;
  for (const Document& d : c.test.documents) {
    for (const SentencePair& s : d.sentences) {
      const auto src = words(s.src), tgt = words(s.tgt);
      const WordAlignment& a = c.test_alignments[k++];
      std::vector<int> src_links(src.size(), 0), tgt_links(tgt.size(), 0);
      for (const WordLink& l : a) {
        REQUIRE(l.sure);
        REQUIRE(l.src < static_cast<int32_t>(src.size()));
        REQUIRE(l.tgt < static_cast<int32_t>(tgt.size()));
        ++src_links[static_cast<size_t>(l.src)];
        ++tgt_links[static_cast<size_t>(l.tgt)];
        const std::string& sw = src[static_cast<size_t>(l.src)];
        const std::string& tw = tgt[static_cast<size_t>(l.tgt)];
        // Names and the full stop are copied; the pronoun translates the pronoun.
        if (std::isupper(static_cast<unsigned char>(sw[0])) || sw == ".") CHECK(sw == tw);
        if (sw == lex.src_subject_pronoun || sw == lex.src_object_pronoun) {
          CHECK(tgt_pronouns.count(tw) == 1);
          ++pronouns;
        }
        if (lex.determiner_gender.count(tw)) CHECK((sw == "ta" || sw == "en"));
        if (sw == "pa") ++past_verbs;
        reordered += l.src != l.tgt;
      }
      // Every word is aligned; only a past verb translates two source words.
      for (int n : src_links) CHECK(n == 1);
      for (int n : tgt_links) CHECK((n == 1 || n == 2));
    }
  }
  CHECK(pronouns > 20);
  CHECK(past_verbs > 20);
  CHECK(reordered > 100);  // verb-final and adjectives after the noun: not a diagonal
}

TEST_CASE("the synthetic corpus writes test.align, and adds it to a corpus written before it") {
  ScratchDir d;
  const SyntheticOptions o = small_options();
  const SyntheticCorpus made = ensure_synthetic(o, d.path("syn"));
  const std::string gold = d.path("syn/test.align");
  REQUIRE(detail::file_exists(gold));
  CHECK(read_alignments(gold) == made.test_alignments);
  CHECK(load_synthetic(d.path("syn")).test_alignments == made.test_alignments);
  const std::string train = slurp(d.path("syn/train.tsv"));
  // A corpus of an older version: no test.align, no fingerprint of it.
  std::filesystem::remove(gold);
  std::string manifest = slurp(d.path("syn/manifest.txt"));
  manifest.erase(manifest.find("fingerprint test.align"), manifest.find('\n', manifest.find("fingerprint test.align")) -
                                                               manifest.find("fingerprint test.align") + 1);
  write_file(d.path("syn/manifest.txt"), manifest);
  const SyntheticCorpus again = ensure_synthetic(o, d.path("syn"));
  CHECK(again.test_alignments == made.test_alignments);
  CHECK(read_alignments(gold) == made.test_alignments);
  CHECK(slurp(d.path("syn/train.tsv")) == train);
  CHECK_THAT(slurp(d.path("syn/manifest.txt")), Contains("fingerprint test.align"));
}

TEST_CASE("token_words maps sentencepiece tokens to the words of the sentence") {
  ScratchDir d;
  SyntheticOptions o = small_options();
  TokenizerOptions to;
  to.vocab_size = 300;
  to.languages = {"src", "tgt"};
  const SyntheticCorpus c = generate_synthetic(o);
  const Tokenizer tok = Tokenizer::train(c.train, to, d.path("tok"));
  std::vector<std::string> texts;
  for (const SentencePair& s : c.test.documents[0].sentences) {
    texts.push_back(s.src);
    texts.push_back(s.tgt);
  }
  for (const std::string& text : texts) {
    const auto ids = tok.encode(text);
    const auto w = token_words(tok, ids, word_count(text));
    REQUIRE(w.size() == ids.size());
    CHECK(w.front() == 0);
    CHECK(w.back() == word_count(text) - 1);
    // Each token's piece (U+2581 dropped) is part of its word.
    const auto ws = words(text);
    std::vector<std::string> rebuilt(ws.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      std::string piece = tok.piece(ids[i]);
      if (piece.rfind("\xE2\x96\x81", 0) == 0) piece = piece.substr(3);
      rebuilt[static_cast<size_t>(w[i])] += piece;
    }
    CHECK(rebuilt == ws);
  }
  // The wrong word count: no map rather than a wrong one.
  CHECK(token_words(tok, tok.encode(texts[0]), word_count(texts[0]) - 1).empty());
  CHECK(word_count("  a \t b  ") == 2);
}
