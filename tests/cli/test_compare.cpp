// `mambamt compare`: the paired bootstrap test of two experiment stores, and
// `mambamt store show`, which summarises their segment tables.
#include <catch2/catch.hpp>

#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "core/store.h"
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
  CHECK(show.output.find("bleu_match_1") == std::string::npos);
}
