// The alignment error rate and the reading of attention maps as alignments.
#include <catch2/catch.hpp>

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
