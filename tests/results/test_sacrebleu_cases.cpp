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

std::vector<std::string> strings(const JsonValue& v) {
  std::vector<std::string> out;
  for (const auto& s : v.as_array()) out.push_back(s.as_string());
  return out;
}

ReferenceStreams streams(const JsonValue& v) {
  ReferenceStreams out;
  for (const auto& s : v.as_array()) out.push_back(strings(s));
  return out;
}

// Sentence-level cases keep refs as streams of one: refs[k][0] is the k-th reference.
std::vector<std::string> sentence_refs(const JsonValue& v) {
  std::vector<std::string> out;
  for (const auto& stream : v.as_array()) out.push_back(stream[0].as_string());
  return out;
}

BleuOptions bleu_options(const JsonValue& o) {
  BleuOptions opt;
  if (const auto* t = o.find("tokenize")) opt.tokenize = parse_tokenizer(t->as_string());
  if (const auto* l = o.find("lowercase")) opt.lowercase = l->as_bool();
  opt.smooth_method = parse_smoothing(o.at("smooth_method").as_string());
  if (!o.at("smooth_value").is_null()) opt.smooth_value = o.at("smooth_value").as_number();
  opt.effective_order = o.at("effective_order").as_bool();
  opt.max_ngram_order = static_cast<int>(o.at("max_ngram_order").as_int());
  return opt;
}

ChrfOptions chrf_options(const JsonValue& o) {
  ChrfOptions opt;
  opt.char_order = static_cast<int>(o.at("char_order").as_int());
  opt.word_order = static_cast<int>(o.at("word_order").as_int());
  opt.beta = o.at("beta").as_number();
  if (const auto* l = o.find("lowercase")) opt.lowercase = l->as_bool();
  opt.whitespace = o.at("whitespace").as_bool();
  opt.eps_smoothing = o.at("eps_smoothing").as_bool();
  return opt;
}

TerOptions ter_options(const JsonValue& o) {
  TerOptions opt;
  opt.normalized = o.at("normalized").as_bool();
  opt.no_punct = o.at("no_punct").as_bool();
  opt.asian_support = o.at("asian_support").as_bool();
  opt.case_sensitive = o.at("case_sensitive").as_bool();
  return opt;
}

std::vector<std::int64_t> ints(const JsonValue& v) {
  std::vector<std::int64_t> out;
  for (const auto& x : v.as_array()) out.push_back(x.as_int());
  return out;
}

// Checks `score` (0..100) against a case's expected value and tolerance.
// Returns an empty string when it matches, else a description.
std::string check_score(const JsonValue& c, double score) {
  const JsonValue& expected = c.at("expected");
  const JsonValue& tol = c.at("tolerance");
  char buf[256];
  if (const auto* s = expected.find("score_str_2dp")) {
    std::snprintf(buf, sizeof buf, "%.2f", score);
    if (s->as_string() == buf) return "";
    return std::string("got ") + buf + " expected " + s->as_string();
  }
  double want = expected.at("score").as_number();
  std::string on = tol.contains("on") ? tol.at("on").as_string() : "score";
  double got = score;
  if (on.rfind("score/100", 0) == 0) {
    got /= 100;
    want /= 100;
  }
  double abs_tol = tol.contains("abs") ? tol.at("abs").as_number() : 0.0;
  bool ok = tol.contains("exact") && tol.at("exact").as_bool() ? got == want
                                                               : std::fabs(got - want) <= abs_tol;
  if (ok) return "";
  std::snprintf(buf, sizeof buf, "got %.12g expected %.12g (tol %g on %s)", got, want, abs_tol,
                on.c_str());
  return buf;
}

}  // namespace

TEST_CASE("every sacreBLEU test-suite case is reproduced") {
  JsonValue doc = read_json_file(data_path("sacrebleu_cases.json"));
  const auto& cases = doc.at("cases").as_array();
  REQUIRE(cases.size() == 89);
  std::map<std::string, int> reproduced;
  for (const auto& c : cases) {
    const std::string id = c.at("id").as_string();
    const std::string metric = c.at("metric").as_string();
    const std::string level = c.at("level").as_string();
    const JsonValue& opts = c.at("options");
    const JsonValue& expected = c.at("expected");
    INFO("case " << id);
    std::string problem;
    if (metric == "bleu" || metric == "bleu_from_stats") {
      BleuOptions opt = bleu_options(opts);
      BleuScore score;
      if (metric == "bleu_from_stats") {
        const JsonValue& st = c.at("stats");
        BleuStats stats;
        stats.counts = ints(st.at("correct"));
        stats.totals = ints(st.at("total"));
        stats.sys_len = st.at("sys_len").as_int();
        stats.ref_len = st.at("ref_len").as_int();
        score = bleu_from_stats(stats, opt);
      } else if (level == "sentence") {
        score = sentence_bleu(c.at("hyps")[0].as_string(), sentence_refs(c.at("refs")), opt);
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
        const std::string want = c.at("derived_sacrebleu_run").at("verbose").as_string();
        if (score.format() != want) problem = "verbose line '" + score.format() + "' != '" + want + "'";
      }
    } else if (metric == "chrf") {
      ChrfOptions opt = chrf_options(opts);
      ChrfScore score = level == "sentence"
                            ? sentence_chrf(c.at("hyps")[0].as_string(), sentence_refs(c.at("refs")), opt)
                            : corpus_chrf(strings(c.at("hyps")), streams(c.at("refs")), opt);
      problem = check_score(c, score.score);
    } else if (metric == "ter") {
      TerScore score = corpus_ter(strings(c.at("hyps")), streams(c.at("refs")), ter_options(opts));
      problem = check_score(c, score.score);
    } else if (metric == "tokenizer_ter") {
      std::string got = ter_tokenize(c.at("hyps")[0].as_string(), ter_options(opts));
      if (got != expected.at("output").as_string()) {
        problem = "tokenized '" + got + "' expected '" + expected.at("output").as_string() + "'";
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
  JsonValue doc = read_json_file(data_path("sacrebleu_extra.json"));
  for (const auto& c : doc.at("A_readme_examples").as_array()) {
    auto hyps = strings(c.at("hyps"));
    auto refs = streams(c.at("refs"));
    const std::string want = c.at("readme_states").as_string();
    if (c.at("metric").as_string() == "bleu") {
      CHECK(corpus_bleu(hyps, refs).format() == want);
    } else {
      ChrfOptions opt;
      CHECK(corpus_chrf(hyps, refs, opt).format() == want);
    }
  }
  for (const auto& c : doc.at("B_derived_chrf").as_array()) {
    ChrfOptions opt = chrf_options(c.at("options"));
    ChrfScore score = corpus_chrf(strings(c.at("hyps")), streams(c.at("refs")), opt);
    INFO(c.at("note").as_string() << " word_order=" << opt.word_order
                                  << " eps=" << opt.eps_smoothing);
    CHECK(score.name() == c.at("derived").at("name").as_string());
    CHECK(score.score == Approx(c.at("derived").at("score").as_number()).margin(1e-9));
  }
  for (const auto& c : doc.at("B_derived_tokenization").as_array()) {
    const std::string input = c.at("input").as_string();
    CHECK(tokenize(input, Tokenizer::k13a) == c.at("13a").as_string());
    CHECK(tokenize(input, Tokenizer::kIntl) == c.at("intl").as_string());
  }
}

TEST_CASE("random corpora agree with a Python transcription of sacreBLEU") {
  // differential_cases.json: tokenizers, lowercase, smoothing, effective order,
  // chrF/chrF++ options and 1-3 references drawn at random
  // (tests/results/data/gen_differential_cases.py).
  JsonValue doc = read_json_file(data_path("differential_cases.json"));
  int n = 0;
  for (const auto& c : doc.at("cases").as_array()) {
    const auto hyps = strings(c.at("hyps"));
    const auto refs = streams(c.at("refs"));
    const JsonValue& bo = c.at("bleu_opts");
    BleuOptions b;
    b.tokenize = parse_tokenizer(bo.at("tok").as_string());
    b.lowercase = bo.at("lc").as_bool();
    b.smooth_method = parse_smoothing(bo.at("smooth").as_string());
    b.effective_order = bo.at("eff").as_bool();
    const JsonValue& co = c.at("chrf_opts");
    ChrfOptions o;
    o.lowercase = co.at("lc").as_bool();
    o.whitespace = co.at("ws").as_bool();
    o.eps_smoothing = co.at("eps").as_bool();
    o.word_order = static_cast<int>(co.at("wo").as_int());
    INFO("case " << n << " tok " << bo.at("tok").as_string());
    CHECK(corpus_bleu(hyps, refs, b).score == Approx(c.at("bleu").as_number()).margin(1e-9));
    CHECK(corpus_chrf(hyps, refs, o).score == Approx(c.at("chrf").as_number()).margin(1e-9));
    ++n;
  }
  CHECK(n == 150);
}
