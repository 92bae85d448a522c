// Cutting a passage's translation into its sentences (results/resegment.h).
#include <catch2/catch.hpp>

#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "results/resegment.h"

using namespace mambamt::results;

namespace {

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

// Word-level Levenshtein distance, the whole matrix.
int64_t distance(const std::string& a, const std::string& b) {
  const auto x = words(a), y = words(b);
  std::vector<std::vector<int64_t>> d(x.size() + 1, std::vector<int64_t>(y.size() + 1));
  for (size_t i = 0; i <= x.size(); ++i) d[i][0] = static_cast<int64_t>(i);
  for (size_t j = 0; j <= y.size(); ++j) d[0][j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= x.size(); ++i)
    for (size_t j = 1; j <= y.size(); ++j)
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + (x[i - 1] == y[j - 1] ? 0 : 1)});
  return d[x.size()][y.size()];
}

int64_t total(const std::vector<std::string>& runs, const std::vector<std::string>& refs) {
  int64_t t = 0;
  for (size_t j = 0; j < refs.size(); ++j) t += distance(runs[j], refs[j]);
  return t;
}

// The least total distance over every cut of `hyp` into refs.size() runs.
int64_t best_by_enumeration(const std::vector<std::string>& hyp, const std::vector<std::string>& refs) {
  int64_t best = -1;
  std::vector<std::string> runs(refs.size());
  std::function<void(size_t, size_t)> cut = [&](size_t j, size_t start) {
    for (size_t end = start; end <= hyp.size(); ++end) {
      if (j + 1 == refs.size() && end != hyp.size()) continue;
      std::string run;
      for (size_t i = start; i < end; ++i) run += (i > start ? " " : "") + hyp[i];
      runs[j] = run;
      if (j + 1 == refs.size()) {
        const int64_t t = total(runs, refs);
        if (best < 0 || t < best) best = t;
      } else {
        cut(j + 1, end);
      }
    }
  };
  cut(0, 0);
  return best;
}

}  // namespace

TEST_CASE("resegment cuts a passage where its words match the reference sentences", "[results]") {
  CHECK(resegment("the cat sat . it slept .", {"the cat sat .", "it slept ."}) ==
        std::vector<std::string>{"the cat sat .", "it slept ."});
  // A word missing, one added, one changed: the cut still follows the references.
  CHECK(resegment("the cat sat it slept well .", {"the cat sat .", "it slept ."}) ==
        std::vector<std::string>{"the cat sat", "it slept well ."});
  CHECK(resegment("the cat sat . it slept . and then woke", {"the cat sat .", "it slept ."}) ==
        std::vector<std::string>{"the cat sat .", "it slept . and then woke"});
  CHECK(resegment("cat sat . slept", {"the cat sat .", "it slept ."}) ==
        std::vector<std::string>{"cat sat .", "slept"});
  // Spaces are normalised to one between words.
  CHECK(resegment("  x   y ", {"x", "y"}) == std::vector<std::string>{"x", "y"});
  CHECK(resegment("", {"a b", "c"}) == std::vector<std::string>{"", ""});
  CHECK(resegment("a b c", {"z"}) == std::vector<std::string>{"a b c"});
  CHECK(resegment("a b c", {}).empty());
  // Ties: the last run starts as early as it can.
  CHECK(resegment("q", {"x", "y"}) == std::vector<std::string>{"", "q"});
  // (Four cuts of "it slept . the cat sat ." cost 6 against these references.)
  CHECK(resegment("it slept . the cat sat .", {"the cat sat .", "it slept ."}) ==
        std::vector<std::string>{"it slept .", "the cat sat ."});
}

TEST_CASE("resegment finds a cut of least total edit distance (every cut enumerated)", "[results]") {
  std::mt19937 rng(7);
  const std::vector<std::string> vocab = {"a", "b", "c", "d"};
  auto sentence = [&](int max_words) {
    std::string s;
    const int n = static_cast<int>(rng() % static_cast<unsigned>(max_words + 1));
    for (int i = 0; i < n; ++i) s += (i ? " " : "") + vocab[rng() % vocab.size()];
    return s;
  };
  for (int trial = 0; trial < 300; ++trial) {
    const std::string hyp = sentence(8);
    std::vector<std::string> refs(1 + rng() % 3);
    for (auto& r : refs) r = sentence(4);
    INFO("hyp \"" << hyp << "\", " << refs.size() << " references, first \"" << refs[0] << "\"");
    const std::vector<std::string> runs = resegment(hyp, refs);
    REQUIRE(runs.size() == refs.size());
    // The runs are the hypothesis's words, in order, each once.
    std::string joined;
    for (const auto& r : runs)
      if (!r.empty()) joined += (joined.empty() ? "" : " ") + r;
    CHECK(words(joined) == words(hyp));
    CHECK(total(runs, refs) == best_by_enumeration(words(hyp), refs));
  }
}

TEST_CASE("split_passage keeps the model's own sentences when it wrote as many as the passage has", "[results]") {
  const std::vector<std::string> refs = {"the cat sat .", "it slept ."};
  // Its separators are kept even where a re-cut would fit the references better.
  PassageSplit own = split_passage({"the cat", "sat . it slept ."}, refs);
  CHECK(own.by_separators);
  CHECK(own.sentences == std::vector<std::string>{"the cat", "sat . it slept ."});
  // One sentence too few, or too many (an empty one where separators meet): re-cut.
  PassageSplit fewer = split_passage({"the cat sat . it slept ."}, refs);
  CHECK_FALSE(fewer.by_separators);
  CHECK(fewer.sentences == refs);
  PassageSplit more = split_passage({"the cat sat .", "", "it slept ."}, refs);
  CHECK_FALSE(more.by_separators);
  CHECK(more.sentences == refs);
}
