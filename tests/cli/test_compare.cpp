// `mambamt compare`: the paired bootstrap test of two experiment stores, and
// `mambamt store show`, which summarises their segment tables.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/store.h"
#include "results/alignment.h"
#include "results/contrastive.h"
#include "results/entities.h"
#include "results/segments.h"
#include "test_util.h"

using namespace mambamt;

namespace {

// 80 reference sentences.
std::vector<std::string> references() {
  std::vector<std::string> refs;
  for (int i = 0; i < 80; ++i)
    refs.push_back("the " + std::string(i % 2 ? "red" : "old") + " boat " + std::to_string(i) + " sailed to island " +
                   std::to_string(i % 7) + " .");
  return refs;
}

// Every `every`-th translation broken (its number dropped, words swapped).
std::vector<std::string> translations(int every, const std::vector<std::string>& refs) {
  std::vector<std::string> hyps = refs;
  for (size_t i = 0; i < hyps.size(); i += static_cast<size_t>(every))
    hyps[i] = "to island sailed the boat " + std::string(i % 2 ? "red" : "old") + " .";
  return hyps;
}

// An experiment directory whose store holds test/segments of these translations.
std::string experiment(TempDir& tmp, const std::string& id, const std::vector<std::string>& hyps,
                       const std::vector<std::string>& refs) {
  const std::string dir = tmp.path(id);
  std::filesystem::create_directories(dir);
  core::StoreIdentity ident;
  ident.experiment_id = id;
  ident.name = "model " + id;
  core::ExperimentStore store = core::ExperimentStore::create(dir + "/store.h5", ident);
  const results::ReferenceStreams streams{refs};
  store.set_table("test/segments",
                  results::segment_table(results::bleu_corpus_segment_stats(hyps, streams),
                                         results::chrf_corpus_segment_stats(hyps, streams), results::ChrfOptions{}));
  store.set_scalar("test/bleu", results::corpus_bleu(hyps, streams).score);
  store.commit();
  return dir;
}

// A sentence-level experiment (aaaa...) and its document-level twin (bbbb...,
// the same references joined in pairs, both translated alike): their test
// segments differ, so BLEU and chrF have no paired test.
std::pair<std::string, std::string> sentence_and_document_twins(TempDir& tmp) {
  const std::vector<std::string> refs = references();
  std::vector<std::string> passages;
  for (size_t i = 0; i + 1 < refs.size(); i += 2) passages.push_back(refs[i] + " " + refs[i + 1]);
  return {experiment(tmp, "aaaaaaaaaaaa", translations(2, refs), refs),
          experiment(tmp, "bbbbbbbbbbbb", translations(2, passages), passages)};
}

// The store of an experiment directory.
core::StoreSnapshot store_in(const std::string& dir) { return core::ExperimentStore::read(dir + "/store.h5"); }

// The last line `mambamt compare` prints for a test with one p-value.
std::string p_value_line(double p) {
  char line[64];
  std::snprintf(line, sizeof line, "p-value    %8.4f\n", p);
  return line;
}

}  // namespace

TEST_CASE("mambamt compare: scores, differences and p-values of two stores on the same segments", "[cli]") {
  TempDir tmp;
  const std::vector<std::string> refs = references();
  const std::string worse = experiment(tmp, "aaaaaaaaaaaa", translations(2, refs), refs);
  const std::string better = experiment(tmp, "bbbbbbbbbbbb", translations(10, refs), refs);
  const std::string close = experiment(tmp, "cccccccccccc", translations(3, refs), refs);

  CommandResult r = run_shell(mambamt_binary() + " compare " + worse + " " + better);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("test set test: 80 segments, the same references"));
  CHECK_THAT(r.output, Catch::Contains("aaaaaaaaaaaa (model aaaaaaaaaaaa)") &&
                           Catch::Contains("bbbbbbbbbbbb (model bbbbbbbbbbbb)"));
  // The printed BLEU of each is its corpus BLEU; the difference is significant.
  const results::ReferenceStreams streams{refs};
  char bleu[32];
  std::snprintf(bleu, sizeof bleu, "%8.2f", results::corpus_bleu(translations(10, refs), streams).score);
  CHECK_THAT(r.output, Catch::Contains(std::string("system     ") + bleu));
  const results::PairedSignificance p = results::paired_significance(
      results::segment_stats(core::ExperimentStore::read(worse + "/store.h5").tables.at("test/segments")),
      results::segment_stats(core::ExperimentStore::read(better + "/store.h5").tables.at("test/segments")));
  CHECK(p.bleu_p < 0.01);
  char line[64];
  std::snprintf(line, sizeof line, "p-value    %8.4f %8.4f", p.bleu_p, p.chrf_p);
  CHECK_THAT(r.output, Catch::Contains(line));

  // A store path works as well as its directory; every third against every
  // second translation broken: a smaller difference, a larger p.
  CommandResult c = run_shell(mambamt_binary() + " compare " + worse + "/store.h5 " + close);
  INFO(c.output);
  REQUIRE(c.code == 0);
  CHECK_THAT(c.output, Catch::Contains("difference   +"));
  const results::PairedSignificance q = results::paired_significance(
      results::segment_stats(core::ExperimentStore::read(worse + "/store.h5").tables.at("test/segments")),
      results::segment_stats(core::ExperimentStore::read(close + "/store.h5").tables.at("test/segments")));
  CHECK(q.bleu_p > p.bleu_p);
  CHECK(q.bleu_delta < p.bleu_delta);
  std::snprintf(line, sizeof line, "p-value    %8.4f %8.4f", q.bleu_p, q.chrf_p);
  CHECK_THAT(c.output, Catch::Contains(line));

  CHECK(c.output.find("COMET") == std::string::npos);  // no segment COMET scores

  // Segment COMET scores in both (0.9 a sentence, 0.3 a broken one): a COMET
  // column, tested on the same resamples.
  for (const auto& [dir, every] : {std::make_pair(worse, 2), std::make_pair(better, 10)}) {
    std::vector<double> scores;
    for (size_t i = 0; i < refs.size(); ++i) scores.push_back(i % static_cast<size_t>(every) == 0 ? 0.3 : 0.9);
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    store.set_table("test/comet_segments", results::comet_segment_table(scores));
    store.commit();
  }
  CommandResult with_comet = run_shell(mambamt_binary() + " compare " + worse + " " + better);
  INFO(with_comet.output);
  REQUIRE(with_comet.code == 0);
  const results::PairedSignificance pc =
      results::paired_significance(*results::store_segments(store_in(worse), "test").own,
                                   *results::store_segments(store_in(better), "test").own);
  CHECK(pc.comet_delta == Approx(0.24));
  CHECK_THAT(with_comet.output, Catch::Contains("    BLEU     chrF    COMET  experiment\n"));
  std::snprintf(line, sizeof line, "difference %+8.2f %+8.2f %+8.4f\n", pc.bleu_delta, pc.chrf_delta, pc.comet_delta);
  CHECK_THAT(with_comet.output, Catch::Contains(line));
  std::snprintf(line, sizeof line, "p-value    %8.4f %8.4f %8.4f\n", pc.bleu_p, pc.chrf_p, pc.comet_p);
  CHECK_THAT(with_comet.output, Catch::Contains(line));
  CHECK(pc.comet_p < 0.01);
  CHECK(pc.bleu_p == p.bleu_p);

  // Other references, no segments, another set: exit 1 naming the store.
  std::vector<std::string> other = refs;
  other.pop_back();
  const std::string shorter = experiment(tmp, "dddddddddddd", translations(10, other), other);
  CommandResult d = run_shell(mambamt_binary() + " compare " + worse + " " + shorter);
  CHECK(d.code == 1);
  CHECK_THAT(d.output, Catch::Contains("scored against different references (80 and 79 segments"));
  CommandResult set = run_shell(mambamt_binary() + " compare " + worse + " " + better + " --test-set dev");
  CHECK(set.code == 1);
  CHECK_THAT(set.output, Catch::Contains(worse + "/store.h5: no segment statistics of test set dev (it has: test;"));
  CommandResult none = run_shell(mambamt_binary() + " compare " + tmp.path("nothing") + " " + better);
  CHECK(none.code == 1);
  CHECK_THAT(none.output, Catch::Contains(tmp.path("nothing") + ": no experiment store (store.h5) here"));

  // store show names the segment table without printing its 80 rows.
  CommandResult show = run_shell(mambamt_binary() + " store show " + better);
  INFO(show.output);
  CHECK(show.code == 0);
  CHECK_THAT(show.output, Catch::Contains("test/segments (80 x 28): per-segment statistics"));
  CHECK_THAT(show.output, Catch::Contains("test/comet_segments (80 x 1): per-segment COMET scores"));
  CHECK(show.output.find("bleu_match_1") == std::string::npos);
}

TEST_CASE("mambamt compare: contrastive accuracy of a document-level model against its sentence-level twin", "[cli]") {
  TempDir tmp;
  // The twins were scored on other test segments (passages against sentences),
  // so BLEU and chrF have no paired test, but the contrastive examples are the same.
  const auto [sent, doc] = sentence_and_document_twins(tmp);
  const std::vector<std::string> refs = references();
  // 100 examples, antecedent distance i % 4: the sentence-level model right on
  // every other one, the document-level one on 9 in 10.
  auto outcomes = [](const std::string& dir, int wrong_every, const std::string& set, int distances = 4) {
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    core::ResultTable t;
    t.columns = {"correct", "distance"};
    for (int i = 0; i < 100; ++i) {
      t.rows.push_back(std::to_string(i));
      t.values.push_back(i % wrong_every == 0 ? 0 : 1);
      t.values.push_back(i % distances);
    }
    store.set_table("contrastive/examples", t);
    store.set_text("data.contrastive", set);
    store.commit();
  };
  CommandResult missing = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(missing.code == 1);  // neither test can run
  CHECK_THAT(missing.output, Catch::Contains("scored against different references (80 and 40 segments"));

  const std::string set = "00000000000000aa (100 examples)";
  outcomes(sent, 2, set);
  outcomes(doc, 10, set);
  CommandResult r = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("BLEU and chrF: ") &&
                           Catch::Contains("scored against different references (80 and 40 segments"));
  CHECK_THAT(r.output, Catch::Contains("contrastive set: 100 examples (75 with the antecedent in an earlier "
                                       "sentence), the same examples"));
  CHECK_THAT(r.output, Catch::Contains("baseline       50.0       66.7  aaaaaaaaaaaa (model aaaaaaaaaaaa)"));
  CHECK_THAT(r.output, Catch::Contains("system         90.0       93.3  bbbbbbbbbbbb (model bbbbbbbbbbbb)"));
  CHECK_THAT(r.output, Catch::Contains("difference    +40.0      +26.7"));
  const results::ContrastiveComparison c =
      results::compare_contrastive(*results::contrastive_outcomes(core::ExperimentStore::read(sent + "/store.h5")),
                                   *results::contrastive_outcomes(core::ExperimentStore::read(doc + "/store.h5")));
  CHECK(c.p < 0.01);
  char line[64];
  std::snprintf(line, sizeof line, "p-value    %8.4f %10.4f", c.p, c.p_earlier);
  CHECK_THAT(r.output, Catch::Contains(line));

  // Another contrastive set: no contrastive test, and no BLEU test either.
  outcomes(doc, 10, "00000000000000bb (100 examples)");
  CommandResult other = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(other.code == 1);
  // Same segments and the same set: both tests.
  const std::string same = experiment(tmp, "cccccccccccc", translations(3, refs), refs);
  outcomes(same, 3, set);
  CommandResult both = run_shell(mambamt_binary() + " compare " + sent + " " + same);
  INFO(both.output);
  CHECK(both.code == 0);
  CHECK_THAT(both.output, Catch::StartsWith("test set test: 80 segments, the same references") &&
                              Catch::Contains("contrastive set: 100 examples"));
  CommandResult sets = run_shell(mambamt_binary() + " compare " + same + " " + doc);
  CHECK(sets.code == 1);
  // Same segments, one store without outcomes: BLEU and chrF, and why no contrastive test.
  const std::string plain = experiment(tmp, "dddddddddddd", translations(4, refs), refs);
  CommandResult partly = run_shell(mambamt_binary() + " compare " + same + " " + plain);
  CHECK(partly.code == 0);
  CHECK_THAT(partly.output, Catch::Contains("test set test: 80 segments") &&
                                Catch::Contains("contrastive accuracy: no paired test (" + plain +
                                                "/store.h5 keeps no per-example outcomes"));
  // A set without antecedents in earlier sentences: that column says so.
  outcomes(same, 3, "00000000000000cc (100 examples)", 1);
  outcomes(plain, 2, "00000000000000cc (100 examples)", 1);
  CommandResult same_sentence = run_shell(mambamt_binary() + " compare " + same + " " + plain);
  INFO(same_sentence.output);
  CHECK(same_sentence.code == 0);
  CHECK_THAT(same_sentence.output, Catch::Contains("(0 with the antecedent in an earlier sentence)") &&
                                       Catch::Contains("difference    -16.0          -\n") &&
                                       !Catch::Contains("nan"));
}

TEST_CASE("mambamt compare: a model that translated passages against one that translated sentences, by sentence",
          "[cli]") {
  TempDir tmp;
  const auto [sent, doc] = sentence_and_document_twins(tmp);
  // The document-level store as evaluation version 5 writes it: its passages
  // also scored by sentence (here: a third of the sentences garbled, against
  // every other one for the sentence-level model).
  const std::vector<std::string> refs = references();
  const results::ReferenceStreams streams{refs};
  const std::vector<std::string> doc_sentences = translations(3, refs);
  const core::ResultTable by_sentence =
      results::segment_table(results::bleu_corpus_segment_stats(doc_sentences, streams),
                             results::chrf_corpus_segment_stats(doc_sentences, streams), results::ChrfOptions{});
  {
    core::ExperimentStore store = core::ExperimentStore::open(doc + "/store.h5");
    store.set_table("test/sentence_segments", by_sentence);
    store.commit();
  }
  const results::SegmentStats sent_stats = results::segment_stats(store_in(sent).tables.at("test/segments"));
  const results::SegmentStats doc_stats = results::segment_stats(by_sentence);
  for (bool swap : {false, true}) {
    INFO("swap " << swap);
    CommandResult r = run_shell(mambamt_binary() + " compare " + (swap ? doc + " " + sent : sent + " " + doc));
    INFO(r.output);
    REQUIRE(r.code == 0);
    CHECK_THAT(r.output, Catch::StartsWith("test set test: 80 sentences, the same references (" +
                                           std::string(swap ? "40 and 80" : "80 and 40") +
                                           " segments: passages translated whole are scored by sentence)"));
    const results::PairedSignificance p =
        swap ? results::paired_significance(doc_stats, sent_stats) : results::paired_significance(sent_stats, doc_stats);
    char line[64];
    std::snprintf(line, sizeof line, "p-value    %8.4f %8.4f\n", p.bleu_p, p.chrf_p);
    CHECK_THAT(r.output, Catch::Contains(line));
  }
  // A sentence table that is not one: named with its store.
  {
    core::ExperimentStore store = core::ExperimentStore::open(doc + "/store.h5");
    core::ResultTable bad = by_sentence;
    bad.columns[3] = "bleu_match_9";
    store.set_table("test/sentence_segments", bad);
    store.commit();
  }
  CommandResult bad = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains(doc + "/store.h5:/results/test/sentence_segments: "));
}

TEST_CASE("mambamt compare: entity consistency over the same documents, documents resampled", "[cli]") {
  TempDir tmp;
  const auto [sent, doc] = sentence_and_document_twins(tmp);
  const std::vector<std::string> refs = references();
  // 40 documents with two repeated entities each, both rendered: consistent on
  // `consistent` of them.
  auto counts = [](const std::string& dir, int consistent, int rendered, const std::string& text) {
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    core::ResultTable t;
    t.columns = {"consistent", "rendered", "repeated"};
    for (int d = 0; d < 40; ++d) {
      t.rows.push_back(std::to_string(d));
      t.values.insert(t.values.end(), {static_cast<double>(consistent), static_cast<double>(rendered), 2});
    }
    store.set_table("entities/by_document", t);
    store.set_text("data.entities", text);
    store.commit();
  };
  const std::string text = "test 00000000000000aa (40 documents, 80 sentences), the first 80 sentences translated";
  counts(sent, 1, 2, text);
  CommandResult one = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(one.code == 1);  // no test runs
  counts(doc, 2, 2, text);
  CommandResult r = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("BLEU and chrF: ") &&
                           Catch::Contains("entity consistency: 40 documents, the same sentences (80 and 80 repeated "
                                           "entities rendered)"));
  CHECK_THAT(r.output, Catch::Contains("baseline       50.0  aaaaaaaaaaaa (model aaaaaaaaaaaa)"));
  CHECK_THAT(r.output, Catch::Contains("system        100.0  bbbbbbbbbbbb (model bbbbbbbbbbbb)"));
  CHECK_THAT(r.output, Catch::Contains("difference    +50.0"));
  const double p = results::paired_consistency_p(*results::entity_consistency_outcomes(store_in(sent)),
                                                 *results::entity_consistency_outcomes(store_in(doc)));
  CHECK(p < 0.01);
  CHECK_THAT(r.output, Catch::EndsWith(p_value_line(p)));
  // Nothing rendered: "-", not NaN, and no difference.
  counts(sent, 0, 0, text);
  CommandResult none = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(none.code == 0);
  CHECK_THAT(none.output, Catch::Contains("baseline          -  aaaaaaaaaaaa") && !Catch::Contains("nan") &&
                              !Catch::Contains("difference"));
  // ... and no p-value: a consistency it does not have cannot differ.
  CHECK_THAT(none.output, Catch::EndsWith("p-value           -  (no test: the baseline renders no repeated entity, "
                                          "so it has no consistency to compare)\n"));
  // Other sentences translated: no test, and why.
  counts(sent, 1, 2, "test 00000000000000aa (40 documents, 80 sentences), the first 40 sentences translated");
  CommandResult other = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(other.code == 1);
  const std::string same = experiment(tmp, "cccccccccccc", translations(3, refs), refs);
  CommandResult partly = run_shell(mambamt_binary() + " compare " + sent + " " + same);
  CHECK(partly.code == 0);
  CHECK_THAT(partly.output, Catch::Contains("entity consistency: no paired test (" + same +
                                            "/store.h5 keeps no per-document counts"));
  counts(same, 1, 2, text);
  CommandResult texts = run_shell(mambamt_binary() + " compare " + sent + " " + same);
  CHECK_THAT(texts.output, Catch::Contains("entity consistency: no paired test (other text translated: "));
}

TEST_CASE("mambamt compare: the alignment error rate of two stores scored on the same gold-aligned sentences",
          "[cli]") {
  TempDir tmp;
  // Twins with no paired BLEU test: only the alignment test can run.
  const auto [sent, doc] = sentence_and_document_twins(tmp);
  // 60 sentences of 10 sure links each, `hits` of 10 predicted links right.
  auto counts = [](const std::string& dir, int64_t hits, int sentences, const std::string& text) {
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    core::ResultTable t;
    t.columns = {"predicted", "sure", "sure_hits", "possible_hits"};
    for (int i = 0; i < sentences; ++i) {
      t.rows.push_back(std::to_string(i / 3) + ":" + std::to_string(i % 3));
      const double h = static_cast<double>(hits + i % 2);
      t.values.insert(t.values.end(), {10, 10, h, h});
    }
    store.set_table("alignment/sentences", t);
    store.set_text("data.alignment", text);
    store.commit();
  };
  const std::string text = "test 00000000000000aa (20 documents, 60 sentences), gold links 00000000000000bb";
  counts(sent, 3, 60, text);
  CommandResult one = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  INFO(one.output);
  CHECK(one.code == 1);  // no test runs
  counts(doc, 6, 60, text);
  CommandResult r = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  INFO(r.output);
  REQUIRE(r.code == 0);
  CHECK_THAT(r.output, Catch::StartsWith("BLEU and chrF: ") &&
                           Catch::Contains("alignment error rate: 60 sentences with gold alignments"));
  // AER = 1 - 2 hits / 20: 3.5 of 10 right on average against 6.5.
  CHECK_THAT(r.output, Catch::Contains("baseline       65.0  aaaaaaaaaaaa (model aaaaaaaaaaaa)"));
  CHECK_THAT(r.output, Catch::Contains("system         35.0  bbbbbbbbbbbb (model bbbbbbbbbbbb)"));
  CHECK_THAT(r.output, Catch::Contains("difference    -30.0"));
  const double p =
      results::paired_aer_p(*results::alignment_outcomes(store_in(sent)), *results::alignment_outcomes(store_in(doc)));
  CHECK(p < 0.01);
  CHECK_THAT(r.output, Catch::EndsWith(p_value_line(p)));
  // store show names the table without printing its 60 rows.
  CommandResult show = run_shell(mambamt_binary() + " store show " + doc);
  CHECK_THAT(show.output, Catch::Contains("alignment/sentences (60 x 4): per-sentence alignment counts"));
  CHECK(show.output.find(" 19:2 ") == std::string::npos);  // the last row
  // Other sentences scored: no test.
  counts(doc, 6, 59, text);
  CommandResult other = run_shell(mambamt_binary() + " compare " + sent + " " + doc);
  CHECK(other.code == 1);
  // Beside a test that runs (BLEU on the same segments), why there is none.
  const std::string same = experiment(tmp, "cccccccccccc", translations(3, references()), references());
  CommandResult partly = run_shell(mambamt_binary() + " compare " + sent + " " + same);
  CHECK(partly.code == 0);
  CHECK_THAT(partly.output, Catch::Contains("alignment error rate: no paired test (" + same +
                                            "/store.h5 keeps no per-sentence alignment counts"));
  counts(same, 6, 59, text);
  CommandResult fewer = run_shell(mambamt_binary() + " compare " + sent + " " + same);
  CHECK(fewer.code == 0);
  CHECK_THAT(fewer.output,
             Catch::Contains("alignment error rate: no paired test (other sentences scored: other parts of test "));
}
