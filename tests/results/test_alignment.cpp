// The alignment error rate and the reading of attention maps as alignments.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>

#include "results/alignment.h"

using namespace mambamt::results;

TEST_CASE("AER, precision and recall over sure and possible links") {
  // S = {0-0, 1-1}, P = S + {2-1}; A = {0-0, 2-1, 2-2}.
  const AlignmentCounts n = score_alignment({{0, 0}, {2, 1}, {2, 2}, {0, 0}}, {{0, 0}, {1, 1}}, {{2, 1}});
  CHECK(n.predicted == 3);
  CHECK(n.sure == 2);
  CHECK(n.sure_hits == 1);
  CHECK(n.possible_hits == 2);
  CHECK(n.aer() == Approx(1.0 - 3.0 / 5.0));
  CHECK(n.precision() == Approx(2.0 / 3.0));
  CHECK(n.recall() == Approx(0.5));

  // Perfect and disjoint alignments; sure links only: AER = 1 - F1.
  CHECK(score_alignment({{0, 1}, {1, 0}}, {{0, 1}, {1, 0}}, {}).aer() == 0.0);
  CHECK(score_alignment({{0, 0}}, {{0, 1}, {1, 0}}, {}).aer() == 1.0);
  const AlignmentCounts half = score_alignment({{0, 0}, {1, 1}}, {{0, 0}, {1, 0}, {2, 2}}, {});
  const double p = 0.5, r = 1.0 / 3.0;
  CHECK(half.aer() == Approx(1.0 - 2 * p * r / (p + r)));

  // Corpus-level: counts are summed before dividing.
  AlignmentCounts total = n;
  total.add(score_alignment({}, {{0, 0}, {1, 1}, {2, 2}}, {}));
  CHECK(total.sentences == 2);
  CHECK(total.aer() == Approx(1.0 - 3.0 / 8.0));
  CHECK(std::isnan(AlignmentCounts{}.aer()));
  CHECK(std::isnan(score_alignment({}, {{0, 0}}, {}).precision()));
}

TEST_CASE("argmax alignment: each target token to the source token it attends to most") {
  // 4 target rows (the last: eos, outside), 5 source columns: two words of
  // two tokens each ("a" = columns 0-1, "b" = 2-3) and eos.
  const float w[4 * 5] = {
      0.6f, 0.1f, 0.1f, 0.1f, 0.1f,  // word 0 -> column 0 (word 0)
      0.1f, 0.1f, 0.1f, 0.6f, 0.1f,  // word 0 -> column 3 (word 1)
      0.1f, 0.1f, 0.1f, 0.1f, 0.6f,  // word 1 -> eos: no link
      0.1f, 0.7f, 0.1f, 0.0f, 0.1f,  // eos row: outside
  };
  const auto links = argmax_alignment(w, 4, 5, {0, 0, 1, -1}, {0, 0, 1, 1, -1});
  CHECK(links == std::vector<Link>{{0, 0}, {1, 0}});
  // Duplicate word links count once.
  const float same[2 * 2] = {0.9f, 0.1f, 0.8f, 0.2f};
  CHECK(argmax_alignment(same, 2, 2, {0, 0}, {0, 0}) == std::vector<Link>{{0, 0}});
  CHECK_THROWS(argmax_alignment(same, 2, 2, {0}, {0, 0}));
}

TEST_CASE("held-out layer choice: each half of the sentences scored at the layer best on the other half") {
  // Counts with AER 1 - 2h/(p+s): `hits` sure hits of 10 predicted and 10 sure links.
  auto counts = [](int64_t hits) {
    AlignmentCounts n;
    n.predicted = n.sure = 10;
    n.sure_hits = n.possible_hits = hits;
    n.sentences = 5;
    return n;
  };
  // Layer 1 is best on half 0 only by chance (9 of 10 there, 2 on half 1);
  // layer 0 is good on both halves.
  const std::array<std::vector<AlignmentCounts>, 2> halves = {
      std::vector<AlignmentCounts>{counts(7), counts(9), counts(1)},
      std::vector<AlignmentCounts>{counts(8), counts(2), counts(1)}};
  std::vector<AlignmentCounts> whole;
  for (size_t l = 0; l < 3; ++l) {
    whole.push_back(halves[0][l]);
    whole.back().add(halves[1][l]);
  }
  CHECK(best_layer(whole) == 0);  // 15 of 20 against 11 of 20
  const HeldOutLayer held = held_out_layer(halves);
  CHECK(held.chosen == std::array<int64_t, 2>{0, 1});  // half 0 by half 1's best, half 1 by half 0's
  // Half 0 at layer 0 (7 hits), half 1 at layer 1 (2 hits): worse than the
  // best layer of the whole set, as an estimate made blind should be here.
  CHECK(held.counts.sentences == 10);
  CHECK(held.counts.aer() == Approx(1.0 - 2.0 * 9 / 40));
  CHECK(held.counts.aer() > whole[0].aer());

  // A layer without any links is never chosen; the first of equals is.
  AlignmentCounts none;
  CHECK(best_layer({none, counts(3), counts(3)}) == 1);
  CHECK(best_layer({none}) == -1);
  CHECK(best_layer({}) == -1);
  // A half whose other half is empty is left out.
  const HeldOutLayer one_sided = held_out_layer({std::vector<AlignmentCounts>{counts(4), counts(6)},
                                                 std::vector<AlignmentCounts>{none, none}});
  CHECK(one_sided.chosen == std::array<int64_t, 2>{-1, 1});
  CHECK(one_sided.counts.sentences == 0);
  CHECK_THROWS(held_out_layer({std::vector<AlignmentCounts>{none}, std::vector<AlignmentCounts>{}}));
}

TEST_CASE("paired bootstrap of AER: per-sentence counts from a store, resampled alike for both systems") {
  // 60 sentences of 10 sure links; the baseline predicts 10 links per
  // sentence with `hits` right.
  auto outcomes = [](const std::vector<int64_t>& hits, const std::string& set) {
    AlignmentOutcomes o;
    o.set = set;
    for (size_t i = 0; i < hits.size(); ++i) {
      o.sentences.push_back("0:" + std::to_string(i));
      AlignmentCounts n;
      n.predicted = n.sure = 10;
      n.sure_hits = n.possible_hits = hits[i];
      n.sentences = 1;
      o.counts.push_back(n);
    }
    return o;
  };
  std::vector<int64_t> base(60), better(60), noisy(60);
  for (size_t i = 0; i < 60; ++i) {
    base[i] = 4 + static_cast<int64_t>(i % 3);                  // 4, 5, 6, ...
    better[i] = base[i] + 3;                                    // 3 more right links in every sentence
    noisy[i] = base[i] + (i % 2 == 0 ? 1 : -1);                 // as good on the whole
  }
  const AlignmentOutcomes b = outcomes(base, "test x"), s = outcomes(better, "test x"), n = outcomes(noisy, "test x");
  CHECK(paired_aer_p(b, s) < 0.01);
  CHECK(paired_aer_p(b, n) > 0.3);
  // Other text or other sentences: refused.
  CHECK_THROWS_WITH(paired_aer_p(b, outcomes(better, "test y")), Catch::Contains("different text"));
  CHECK_THROWS_WITH(paired_aer_p(b, outcomes(std::vector<int64_t>(59, 5), "test x")),
                    Catch::Contains("scored sentences differ (60 and 59)"));

  // From a store: the table alignment/sentences and the text data.alignment.
  mambamt::core::StoreSnapshot store;
  CHECK_FALSE(alignment_outcomes(store));
  store.tables["alignment/sentences"] = {{"0:0", "0:1"}, {"predicted", "sure", "sure_hits", "possible_hits"},
                                         {3, 4, 2, 2, 5, 5, 5, 5}};
  CHECK_FALSE(alignment_outcomes(store));  // no text
  store.texts["data.alignment"] = "test x";
  const auto o = alignment_outcomes(store);
  REQUIRE(o);
  CHECK(o->sentences == std::vector<std::string>{"0:0", "0:1"});
  CHECK(o->counts[0].predicted == 3);
  CHECK(o->counts[0].sure == 4);
  CHECK(o->counts[1].possible_hits == 5);
  store.tables["alignment/sentences"].columns[3] = "other";
  CHECK_FALSE(alignment_outcomes(store));
}
