// BLEU, chrF and TER against the values sacreBLEU's own test suite states
// (tests/results/data/sacrebleu_cases.json, copied from the team's shared test
// data with the inputs), plus the README and chrF++ values of sacrebleu_extra.json.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>

#include "results/bleu.h"
#include "results/chrf.h"
#include "results/json.h"
#include "results/ter.h"
#include "test_support.h"

using namespace mambamt::results;
using mambamt::results::testing::data_path;

namespace {

using Json = nlohmann::ordered_json;

std::vector<std::string> strings(const Json& v) {
  std::vector<std::string> out;
  for (const auto& s : v) out.push_back(s.get<std::string>());
  return out;
}

ReferenceStreams streams(const Json& v) {
  ReferenceStreams out;
  for (const auto& s : v) out.push_back(strings(s));
  return out;
}

// Sentence-level cases keep refs as streams of one: refs[k][0] is the k-th reference.
std::vector<std::string> sentence_refs(const Json& v) {
  std::vector<std::string> out;
  for (const auto& stream : v) out.push_back(stream[0].get<std::string>());
  return out;
}

BleuOptions bleu_options(const Json& o) {
  BleuOptions opt;
  if (o.contains("tokenize")) opt.tokenize = parse_tokenizer(o.at("tokenize").get<std::string>());
  opt.lowercase = o.value("lowercase", opt.lowercase);
  opt.smooth_method = parse_smoothing(o.at("smooth_method").get<std::string>());
  if (!o.at("smooth_value").is_null()) opt.smooth_value = o.at("smooth_value").get<double>();
  opt.effective_order = o.at("effective_order").get<bool>();
  opt.max_ngram_order = o.at("max_ngram_order").get<int>();
  return opt;
}

ChrfOptions chrf_options(const Json& o) {
  ChrfOptions opt;
  opt.char_order = o.at("char_order").get<int>();
  opt.word_order = o.at("word_order").get<int>();
  opt.beta = o.at("beta").get<double>();
  opt.lowercase = o.value("lowercase", opt.lowercase);
  opt.whitespace = o.at("whitespace").get<bool>();
  opt.eps_smoothing = o.at("eps_smoothing").get<bool>();
  return opt;
}

TerOptions ter_options(const Json& o) {
  TerOptions opt;
  opt.normalized = o.at("normalized").get<bool>();
  opt.no_punct = o.at("no_punct").get<bool>();
  opt.asian_support = o.at("asian_support").get<bool>();
  opt.case_sensitive = o.at("case_sensitive").get<bool>();
  return opt;
}

std::vector<std::int64_t> ints(const Json& v) {
  std::vector<std::int64_t> out;
  for (const auto& x : v) out.push_back(x.get<std::int64_t>());
  return out;
}

// Checks `score` (0..100) against a case's expected value and tolerance.
// Returns an empty string when it matches, else a description.
std::string check_score(const Json& c, double score) {
  const Json& expected = c.at("expected");
  const Json& tol = c.at("tolerance");
  char buf[256];
  if (expected.contains("score_str_2dp")) {
    const std::string s = expected.at("score_str_2dp").get<std::string>();
    std::snprintf(buf, sizeof buf, "%.2f", score);
    if (s == buf) return "";
    return std::string("got ") + buf + " expected " + s;
  }
  double want = expected.at("score").get<double>();
  std::string on = tol.contains("on") ? tol.at("on").get<std::string>() : "score";
  double got = score;
  if (on.rfind("score/100", 0) == 0) {
    got /= 100;
    want /= 100;
  }
  double abs_tol = tol.contains("abs") ? tol.at("abs").get<double>() : 0.0;
  bool ok = tol.contains("exact") && tol.at("exact").get<bool>() ? got == want
                                                               : std::fabs(got - want) <= abs_tol;
  if (ok) return "";
  std::snprintf(buf, sizeof buf, "got %.12g expected %.12g (tol %g on %s)", got, want, abs_tol,
                on.c_str());
  return buf;
}

}  // namespace

TEST_CASE("every sacreBLEU test-suite case is reproduced") {
  Json doc = read_json_file(data_path("sacrebleu_cases.json"));
  const auto& cases = doc.at("cases");
  REQUIRE(cases.size() == 89);
  std::map<std::string, int> reproduced;
  for (const auto& c : cases) {
    const std::string id = c.at("id").get<std::string>();
    const std::string metric = c.at("metric").get<std::string>();
    const std::string level = c.at("level").get<std::string>();
    const Json& opts = c.at("options");
    const Json& expected = c.at("expected");
    INFO("case " << id);
    std::string problem;
    if (metric == "bleu" || metric == "bleu_from_stats") {
      BleuOptions opt = bleu_options(opts);
      BleuScore score;
      if (metric == "bleu_from_stats") {
        const Json& st = c.at("stats");
        BleuStats stats;
        stats.counts = ints(st.at("correct"));
        stats.totals = ints(st.at("total"));
        stats.sys_len = st.at("sys_len").get<std::int64_t>();
        stats.ref_len = st.at("ref_len").get<std::int64_t>();
        score = bleu_from_stats(stats, opt);
      } else if (level == "sentence") {
        score = sentence_bleu(c.at("hyps")[0].get<std::string>(), sentence_refs(c.at("refs")), opt);
      } else {
        score = corpus_bleu(strings(c.at("hyps")), streams(c.at("refs")), opt);
      }
      if (expected.contains("counts")) {
        if (score.counts != ints(expected.at("counts")) ||
            score.totals != ints(expected.at("totals"))) {
          problem = "counts/totals differ";
        }
      } else {
        problem = check_score(c, score.score);
      }
      // The derived run's verbose line (not stated by the tests) must match too.
      if (problem.empty() && c.contains("derived_sacrebleu_run") &&
          c.at("derived_sacrebleu_run").contains("verbose") &&
          opt.smooth_method != Smoothing::kAddK) {
        const std::string want = c.at("derived_sacrebleu_run").at("verbose").get<std::string>();
        if (score.format() != want) problem = "verbose line '" + score.format() + "' != '" + want + "'";
      }
    } else if (metric == "chrf") {
      ChrfOptions opt = chrf_options(opts);
      ChrfScore score = level == "sentence"
                            ? sentence_chrf(c.at("hyps")[0].get<std::string>(), sentence_refs(c.at("refs")), opt)
                            : corpus_chrf(strings(c.at("hyps")), streams(c.at("refs")), opt);
      problem = check_score(c, score.score);
    } else if (metric == "ter") {
      TerScore score = corpus_ter(strings(c.at("hyps")), streams(c.at("refs")), ter_options(opts));
      problem = check_score(c, score.score);
    } else if (metric == "tokenizer_ter") {
      std::string got = ter_tokenize(c.at("hyps")[0].get<std::string>(), ter_options(opts));
      if (got != expected.at("output").get<std::string>()) {
        problem = "tokenized '" + got + "' expected '" + expected.at("output").get<std::string>() + "'";
      }
    } else {
      FAIL("unknown metric " << metric);
    }
    CHECK(problem == "");
    if (problem.empty()) ++reproduced[metric];
  }
  int total = 0;
  for (const auto& [metric, n] : reproduced) total += n;
  WARN("sacreBLEU cases reproduced: " << total << " of " << cases.size());
  CHECK(total == 89);
}

TEST_CASE("sacreBLEU README and chrF++ values") {
  Json doc = read_json_file(data_path("sacrebleu_extra.json"));
  for (const auto& c : doc.at("A_readme_examples")) {
    auto hyps = strings(c.at("hyps"));
    auto refs = streams(c.at("refs"));
    const std::string want = c.at("readme_states").get<std::string>();
    if (c.at("metric").get<std::string>() == "bleu") {
      CHECK(corpus_bleu(hyps, refs).format() == want);
    } else {
      ChrfOptions opt;
      CHECK(corpus_chrf(hyps, refs, opt).format() == want);
    }
  }
  for (const auto& c : doc.at("B_derived_chrf")) {
    ChrfOptions opt = chrf_options(c.at("options"));
    ChrfScore score = corpus_chrf(strings(c.at("hyps")), streams(c.at("refs")), opt);
    INFO(c.at("note").get<std::string>() << " word_order=" << opt.word_order
                                  << " eps=" << opt.eps_smoothing);
    CHECK(score.name() == c.at("derived").at("name").get<std::string>());
    CHECK(score.score == Approx(c.at("derived").at("score").get<double>()).margin(1e-9));
  }
  for (const auto& c : doc.at("B_derived_tokenization")) {
    const std::string input = c.at("input").get<std::string>();
    CHECK(tokenize(input, Tokenizer::k13a) == c.at("13a").get<std::string>());
    CHECK(tokenize(input, Tokenizer::kIntl) == c.at("intl").get<std::string>());
  }
}

TEST_CASE("random corpora agree with a Python transcription of sacreBLEU") {
  // differential_cases.json: tokenizers, lowercase, smoothing, effective order,
  // chrF/chrF++ options and 1-3 references drawn at random
  // (tests/results/data/gen_differential_cases.py).
  Json doc = read_json_file(data_path("differential_cases.json"));
  int n = 0;
  for (const auto& c : doc.at("cases")) {
    const auto hyps = strings(c.at("hyps"));
    const auto refs = streams(c.at("refs"));
    const Json& bo = c.at("bleu_opts");
    BleuOptions b;
    b.tokenize = parse_tokenizer(bo.at("tok").get<std::string>());
    b.lowercase = bo.at("lc").get<bool>();
    b.smooth_method = parse_smoothing(bo.at("smooth").get<std::string>());
    b.effective_order = bo.at("eff").get<bool>();
    const Json& co = c.at("chrf_opts");
    ChrfOptions o;
    o.lowercase = co.at("lc").get<bool>();
    o.whitespace = co.at("ws").get<bool>();
    o.eps_smoothing = co.at("eps").get<bool>();
    o.word_order = co.at("wo").get<int>();
    INFO("case " << n << " tok " << bo.at("tok").get<std::string>());
    CHECK(corpus_bleu(hyps, refs, b).score == Approx(c.at("bleu").get<double>()).margin(1e-9));
    CHECK(corpus_chrf(hyps, refs, o).score == Approx(c.at("chrf").get<double>()).margin(1e-9));
    ++n;
  }
  CHECK(n == 150);
}
