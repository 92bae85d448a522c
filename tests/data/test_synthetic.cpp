// The synthetic document-level corpus: determinism, files, and the properties
// that make it a document-level task (pronoun gender set by an earlier
// sentence, invisible in the pronoun's own sentence; entities copied and
// recurring; ambiguous words consistent within a document).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "data/detail/text.h"
#include "data/synthetic.h"
#include "data_fixtures.h"

using namespace mambamt::data;
using namespace mambamt::data::testing;
using Catch::Matchers::Contains;

namespace {

SyntheticOptions small_options() {
  SyntheticOptions o;
  o.train_docs = 400;
  o.valid_docs = 30;
  o.test_docs = 150;
  return o;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool is_entity(const std::string& w) { return !w.empty() && std::isupper(static_cast<unsigned char>(w[0])); }

int pronoun_gender(const SyntheticLexicon& lex, const std::string& w) {
  for (int g = 0; g < 3; ++g)
    if (lex.subject_pronouns[static_cast<size_t>(g)] == w || lex.object_pronouns[static_cast<size_t>(g)] == w) return g;
  return -1;
}

}  // namespace

TEST_CASE("synthetic corpus is a pure function of its options") {
  const SyntheticOptions o = small_options();
  const SyntheticCorpus a = generate_synthetic(o);
  const SyntheticCorpus b = generate_synthetic(o);
  CHECK(a.train == b.train);
  CHECK(a.valid == b.valid);
  CHECK(a.test == b.test);
  CHECK((a.contrastive == b.contrastive));
  REQUIRE(a.entities.size() == b.entities.size());
  for (size_t i = 0; i < a.entities.size(); ++i) CHECK(a.entities[i].name == b.entities[i].name);

  SyntheticOptions other = o;
  other.seed = o.seed + 1;
  CHECK_FALSE(generate_synthetic(other).train == a.train);

  CHECK(a.train.documents.size() == 400);
  CHECK(a.valid.documents.size() == 30);
  CHECK(a.test.documents.size() == 150);
  for (const auto& d : a.train.documents) {
    CHECK(d.sentences.size() >= 3);
    CHECK(d.sentences.size() <= 8);
  }
}

TEST_CASE("synthetic options are validated") {
  SyntheticOptions o;
  o.max_sentences = 2;
  CHECK_THAT(input_error([&] { generate_synthetic(o); }), Contains("max_sentences"));
  o = SyntheticOptions{};
  o.vocab_size = 5;
  CHECK_THAT(input_error([&] { generate_synthetic(o); }), Contains("vocab_size"));
  // The smallest vocabulary the config allows still generates.
  o.vocab_size = 20;
  o.train_docs = 20;
  CHECK(generate_synthetic(o).train.documents.size() == 20);
}

TEST_CASE("synthetic corpus files: written once, reused, never overwritten") {
  ScratchDir d;
  const SyntheticOptions o = small_options();
  const SyntheticCorpus made = ensure_synthetic(o, d.path("syn"));
  for (const char* f : {"train.tsv", "valid.tsv", "test.tsv", "contrastive.tsv", "entities.tsv", "manifest.txt"}) {
    CHECK(mambamt::data::detail::file_exists(d.path(std::string("syn/") + f)));
  }
  // The splits are plain TSV with doc ids: the ordinary reader loads them.
  CHECK(read_tsv(d.path("syn/train.tsv")) == made.train);
  const SyntheticCorpus loaded = ensure_synthetic(o, d.path("syn"));
  CHECK(loaded.train == made.train);
  CHECK(loaded.test == made.test);
  CHECK((loaded.contrastive == made.contrastive));
  REQUIRE(loaded.entities.size() == made.entities.size());
  CHECK(loaded.entities[0].name == made.entities[0].name);
  CHECK(loaded.entities[0].train == made.entities[0].train);

  const std::string before = slurp(d.path("syn/train.tsv"));
  SyntheticOptions other = o;
  other.seed = 99;
  CHECK_THAT(input_error([&] { ensure_synthetic(other, d.path("syn")); }),
             Contains(d.path("syn/manifest.txt")) && Contains("other options"));
  CHECK(slurp(d.path("syn/train.tsv")) == before);
}

TEST_CASE("a damaged synthetic corpus file is set aside and generated again, to the same bytes") {
  ScratchDir d;
  const SyntheticOptions o = small_options();
  const SyntheticCorpus made = ensure_synthetic(o, d.path("syn"));
  const std::string train = d.path("syn/train.tsv");
  const std::string original = slurp(train);
  // Cut at a line boundary: the reader alone would load fewer documents.
  const std::string cut = original.substr(0, original.find('\n', original.size() / 2) + 1);
  {
    std::ofstream out(train, std::ios::binary | std::ios::trunc);
    out << cut;
  }
  REQUIRE(read_tsv(train).documents.size() < made.train.documents.size());
  std::filesystem::remove(d.path("syn/test.tsv"));
  const SyntheticCorpus again = ensure_synthetic(o, d.path("syn"));
  CHECK(again.train == made.train);
  CHECK(again.test == made.test);
  CHECK(slurp(train) == original);
  CHECK(slurp(train + ".unreadable") == cut);
  CHECK(mambamt::data::detail::file_exists(d.path("syn/test.tsv")));
  // Undamaged now: loaded as it is.
  CHECK(ensure_synthetic(o, d.path("syn")).train == made.train);
  CHECK_FALSE(mambamt::data::detail::file_exists(train + ".unreadable.1"));
}

TEST_CASE("pronoun gender in the target is set by the antecedent in an earlier sentence") {
  const SyntheticOptions o = small_options();
  const SyntheticCorpus c = generate_synthetic(o);
  const auto& lex = c.lexicon;
  std::map<int, int64_t> distances;
  int64_t pronouns = 0;
  auto check_split = [&](const Corpus& corpus, int64_t max_distance) {
    for (const auto& doc : corpus.documents) {
      int ante_gender = -1, ante_at = -1;
      for (size_t s = 0; s < doc.sentences.size(); ++s) {
        const auto t = words(doc.sentences[s].tgt);
        const auto src = words(doc.sentences[s].src);
        // A sentence whose subject is a common noun starts with a determiner
        // that agrees with the noun's gender: it sets the antecedent.
        auto det = lex.determiner_gender.find(t[0]);
        if (det != lex.determiner_gender.end()) {
          REQUIRE(lex.noun_gender.count(t[1]));
          CHECK(lex.noun_gender.at(t[1]) == det->second);  // agreement
          ante_gender = det->second;
          ante_at = static_cast<int>(s);
        }
        int n_pron = 0;
        for (const auto& w : t) {
          const int g = pronoun_gender(lex, w);
          if (g < 0) continue;
          ++n_pron;
          ++pronouns;
          REQUIRE(ante_gender >= 0);  // never a pronoun without an antecedent
          CHECK(g == ante_gender);
          const int d = static_cast<int>(s) - ante_at;
          CHECK(d <= max_distance);
          ++distances[d];
        }
        CHECK(n_pron <= 1);
        // The source has one pronoun form per case, whatever the gender.
        int src_pron = 0;
        for (const auto& w : src) src_pron += (w == lex.src_subject_pronoun || w == lex.src_object_pronoun);
        CHECK(src_pron == n_pron);
      }
    }
  };
  check_split(c.train, o.max_distance);
  check_split(c.test, o.test_max_distance);
  CHECK(pronouns > 500);
  for (int d = 0; d <= 3; ++d) CHECK(distances[d] > 20);
  CHECK(distances[4] + distances[5] > 0);  // only in test
}

TEST_CASE("the pronoun's own sentence does not reveal its gender") {
  // What a sentence-level model sees: the source sentence. Over all pronoun
  // sentences, no source word predicts the target pronoun's gender, and the
  // genders are balanced, so such a model is near chance (1/3).
  SyntheticOptions o;
  o.train_docs = 2000;
  const SyntheticCorpus c = generate_synthetic(o);
  const auto& lex = c.lexicon;
  std::array<int64_t, 3> by_gender{};
  std::map<std::string, std::array<int64_t, 3>> by_word;
  for (const auto& doc : c.train.documents)
    for (const auto& s : doc.sentences) {
      int g = -1;
      for (const auto& w : words(s.tgt)) g = std::max(g, pronoun_gender(lex, w));
      if (g < 0) continue;
      // Only sentences whose pronoun refers to an earlier sentence.
      if (lex.determiner_gender.count(words(s.tgt)[0])) continue;
      ++by_gender[static_cast<size_t>(g)];
      for (const auto& w : words(s.src)) ++by_word[w][static_cast<size_t>(g)];
    }
  const int64_t total = by_gender[0] + by_gender[1] + by_gender[2];
  REQUIRE(total > 2000);
  for (int g = 0; g < 3; ++g) {
    const double share = static_cast<double>(by_gender[static_cast<size_t>(g)]) / static_cast<double>(total);
    CHECK(share > 0.25);
    CHECK(share < 0.42);
  }
  // A per-word majority vote (the best a bag-of-words sentence model can do
  // with one word) stays far below what the context gives (100%).
  for (const auto& [w, counts] : by_word) {
    const int64_t n = counts[0] + counts[1] + counts[2];
    if (n < 100) continue;
    const int64_t top = std::max({counts[0], counts[1], counts[2]});
    INFO("source word " << w << " with " << n << " occurrences");
    CHECK(static_cast<double>(top) / static_cast<double>(n) < 0.5);
  }
}

TEST_CASE("named entities are copied verbatim, recur within documents, and some are unseen") {
  const SyntheticCorpus c = generate_synthetic(small_options());
  std::map<std::string, int64_t> train_count;
  int64_t docs_with_repeat = 0;
  for (const auto& doc : c.train.documents) {
    std::map<std::string, int> in_doc;
    for (const auto& s : doc.sentences) {
      std::multiset<std::string> src_ents, tgt_ents;
      for (const auto& w : words(s.src))
        if (is_entity(w)) src_ents.insert(w);
      for (const auto& w : words(s.tgt))
        if (is_entity(w)) tgt_ents.insert(w);
      CHECK(src_ents == tgt_ents);  // copied verbatim, same count
      for (const auto& e : src_ents) {
        ++train_count[e];
        ++in_doc[e];
      }
    }
    for (const auto& [e, n] : in_doc) docs_with_repeat += n > 1 ? 1 : 0;
  }
  CHECK(docs_with_repeat > static_cast<int64_t>(c.train.documents.size()) / 3);
  int64_t unseen_in_test = 0, frequent = 0, regular = 0;
  for (const auto& e : c.entities) {
    CHECK(e.train == train_count[e.name]);
    if (e.train == 0 && e.test > 0) ++unseen_in_test;
    if (e.train >= 16) ++frequent;
    if (e.train >= 1 && e.train < 16) ++regular;
  }
  CHECK(unseen_in_test > 0);
  CHECK(frequent > 0);  // all three buckets of the entity-recall analysis
  CHECK(regular > 0);
}

TEST_CASE("ambiguous words are translated consistently within a document, cued at first mention") {
  const SyntheticCorpus c = generate_synthetic(small_options());
  const auto& lex = c.lexicon;
  REQUIRE(lex.ambiguous.size() == 8);
  std::map<std::string, std::set<std::string>> senses_seen;
  int64_t later_mentions = 0;
  for (const auto& doc : c.train.documents) {
    std::map<std::string, std::string> sense;  // source noun -> target noun in this doc
    for (const auto& s : doc.sentences) {
      const auto src = words(s.src);
      const auto tgt = words(s.tgt);
      for (size_t i = 0; i < src.size(); ++i) {
        auto it = lex.ambiguous.find(src[i]);
        if (it == lex.ambiguous.end()) continue;
        const auto& [a, b] = it->second;
        const bool has_a = std::count(tgt.begin(), tgt.end(), a) > 0;
        const bool has_b = std::count(tgt.begin(), tgt.end(), b) > 0;
        REQUIRE((has_a || has_b));
        const std::string used = has_a ? a : b;
        senses_seen[src[i]].insert(used);
        if (!sense.count(src[i])) {
          // First mention: the adjective right before the noun is the cue of this sense.
          REQUIRE(i > 0);
          REQUIRE(lex.cue_adjectives.count(src[i - 1]));
          CHECK(lex.cue_adjectives.at(src[i - 1]) == used);
          sense[src[i]] = used;
        } else {
          ++later_mentions;
          CHECK(sense[src[i]] == used);
          CHECK_FALSE((i > 0 && lex.cue_adjectives.count(src[i - 1])));
        }
      }
    }
  }
  CHECK(later_mentions > 100);
  for (const auto& [w, used] : senses_seen) CHECK(used.size() == 2);
}

TEST_CASE("the contrastive set: reference and wrong-pronoun variants, by pronoun and distance") {
  const SyntheticOptions o = small_options();
  const SyntheticCorpus c = generate_synthetic(o);
  std::map<std::string, const Document*> docs;
  for (const auto& d : c.test.documents) docs[d.id] = &d;
  std::map<std::string, int64_t> buckets, labels;
  int64_t lexical = 0;
  for (const auto& e : c.contrastive) {
    REQUIRE(docs.count(e.doc_id));
    const Document& d = *docs[e.doc_id];
    REQUIRE(e.sentence >= 1);
    REQUIRE(e.sentence <= static_cast<int64_t>(d.sentences.size()));
    const auto& s = d.sentences[static_cast<size_t>(e.sentence - 1)];
    CHECK(e.source == s.src);
    CHECK(e.reference == s.tgt);
    CHECK(e.src_context.size() == static_cast<size_t>(e.sentence - 1));
    CHECK(e.tgt_context.size() == e.src_context.size());
    if (!e.src_context.empty()) CHECK(e.tgt_context.back() == d.sentences[static_cast<size_t>(e.sentence - 2)].tgt);
    REQUIRE_FALSE(e.contrastive.empty());
    if (e.phenomenon == "pronoun") {
      CHECK(e.contrastive.size() == 2);
      const auto ref = words(e.reference);
      for (const auto& v : e.contrastive) {
        const auto var = words(v);
        REQUIRE(var.size() == ref.size());
        int diff = 0;
        for (size_t i = 0; i < ref.size(); ++i) {
          if (ref[i] == var[i]) continue;
          ++diff;
          CHECK(ref[i] == e.label);
          CHECK(pronoun_gender(c.lexicon, var[i]) >= 0);
        }
        CHECK(diff == 1);
      }
      ++buckets[distance_bucket(e.distance)];
      ++labels[e.label];
    } else {
      CHECK(e.phenomenon == "lexical");
      CHECK(e.contrastive.size() == 1);
      ++lexical;
    }
  }
  for (const char* b : {"0", "1", "2", "3", ">3"}) {
    INFO("bucket " << b);
    CHECK(buckets[b] > 0);
  }
  CHECK(labels.size() == 6);  // three genders x two cases
  CHECK(lexical > 0);
}
