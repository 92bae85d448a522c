// run_experiment end to end: divergence, store ownership, a completed store
// left alone, the evaluation writing every result name of docs/STORE.md, and
// the CLI commands on the result.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <sstream>
#include <string>

#include "core/checkpoint.h"
#include "core/device.h"
#include "core/error.h"
#include "core/store.h"
#include "kernels/isa.h"
#include "results/contrastive.h"
#include "results/references.h"
#include "results/segments.h"
#include "train/decode.h"
#include "train/evaluate.h"
#include "train/experiment.h"
#include "train/prepare.h"
#include "train/translate.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

train::RunResult run(const core::ExperimentConfig& c, const std::string& dir, bool eval = false) {
  train::RunOptions o;
  o.exp_dir = dir;
  o.skip_evaluation = !eval;
  o.shared_dir = fs::path(dir).parent_path().string() + "/shared";
  return train::run_experiment(c, o);
}

// The results of a store by kind and name, tables with their columns (but
// the heatmaps).
std::set<std::string> result_names(const core::StoreSnapshot& s) {
  std::set<std::string> out;
  for (const auto& [k, v] : s.scalars) out.insert("scalar " + k);
  for (const auto& [k, t] : s.tables) {
    if (k.rfind("explain/", 0) == 0) {  // its columns are the tokens of a sentence
      out.insert("table " + k);
      continue;
    }
    std::string columns;
    for (const std::string& c : t.columns) columns += (columns.empty() ? "" : ",") + c;
    out.insert("table " + k + " (" + columns + ")");
  }
  for (const auto& [k, v] : s.texts) out.insert("text " + k);
  return out;
}

int64_t count_lines(const std::string& path) {
  std::ifstream in(path);
  int64_t n = 0;
  for (std::string l; std::getline(in, l);) ++n;
  return n;
}

}  // namespace

TEST_CASE("an absurd learning rate (10, weight decay 1, no clipping) fails the experiment as diverged and no NaN reaches a checkpoint") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config({{"train.lr", "10.0"},
                                                            {"train.warmup_steps", "0"},
                                                            {"train.clip_norm", "0"},
                                                            {"train.weight_decay", "1.0"},
                                                            {"train.schedule", "\"constant\""},
                                                            {"train.max_steps", "200"},
                                                            {"train.checkpoint_every", "1"},
                                                            {"train.validate_every", "1000"}});
  const std::string dir = tmp.path("exp");
  train::RunResult r = run(c, dir);
  REQUIRE(r.state == core::RunState::failed);
  CHECK_THAT(r.error, Catch::StartsWith("diverged at step "));
  CHECK_THAT(r.error, Catch::Contains("(loss="));
  auto snap = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(snap.status.state == core::RunState::failed);
  CHECK(snap.status.last_error == r.error);
  // Every checkpoint on disk holds finite numbers only.
  core::CheckpointDir ck(dir + "/ckpt");
  int checked = 0;
  for (auto step : ck.steps()) {
    auto c2 = core::read_checkpoint(ck.path_for_step(step));
    for (auto& [name, t] : c2.tensors) {
      if (!t.is_floating_point()) continue;
      INFO(name << " at step " << step);
      CHECK(torch::isfinite(t).all().item<bool>());
    }
    ++checked;
  }
  CHECK(checked > 0);
  // The failure step is after the last checkpoint.
  const int64_t failed_at = std::stoll(r.error.substr(std::string("diverged at step ").size()));
  if (ck.latest_step()) CHECK(*ck.latest_step() < failed_at);
}

TEST_CASE("a directory holding another experiment's store is refused and left unchanged") {
  TempDir tmp;
  const std::string dir = tmp.path("exp");
  const core::ExperimentConfig a = train_test::tiny_config({{"train.max_steps", "2"}});
  const core::ExperimentConfig b = train_test::tiny_config({{"train.max_steps", "3"}});
  REQUIRE(run(a, dir).state == core::RunState::completed);
  const std::string before = read_text(dir + "/store.h5");
  CHECK_THROWS_AS(run(b, dir), InputError);
  CHECK_THROWS_WITH(run(b, dir), Catch::Contains(a.id()) && Catch::Contains("holds the store of experiment"));
  CHECK(read_text(dir + "/store.h5") == before);
}

TEST_CASE("`mambamt train --device` overrides train.device for the run, not the experiment's identity") {
  TempDir tmp;
  // The experiment asks for a GPU.
  const std::vector<std::pair<std::string, std::string>> over = {{"train.device", "\"cuda\""},
                                                                  {"train.max_steps", "2"}};
  const std::string cfg = train_test::write_config(tmp.dir(), "exp", over);
  const std::string dir = tmp.path("exp");
  const std::string train = mambamt_binary() + " train " + cfg + " --out " + dir + " --shared " + tmp.path("shared") +
                            " --no-eval";

  CommandResult bad = run_shell(train + " --device tpu");
  INFO(bad.output);
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--device tpu: use auto, cpu or cuda"));
  if (core::cuda_device_count() == 0) {
    // Refused before anything is written, unlike the config's own "cuda",
    // which fails the experiment in its store.
    CommandResult no_gpu = run_shell(train + " --device cuda");
    INFO(no_gpu.output);
    CHECK(no_gpu.code == 1);
    CHECK_THAT(no_gpu.output, Catch::Contains("no GPU is visible"));
  }
  CHECK_FALSE(fs::exists(dir));

  CommandResult cpu = run_shell(train + " --device cpu");
  INFO(cpu.output);
  REQUIRE(cpu.code == 0);
  const auto snap = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(snap.status.state == core::RunState::completed);
  CHECK(snap.experiment_id == train_test::tiny_config(over).id());
  CHECK(snap.system.at("device") == "cpu");
}

TEST_CASE("data preparation is shared and keyed by the fields it depends on") {
  TempDir tmp;
  const core::ExperimentConfig a = train_test::tiny_config();
  const core::ExperimentConfig b = train_test::tiny_config({{"train.lr", "1e-3"}, {"model.d_state", "4"}});
  const core::ExperimentConfig c = train_test::tiny_config({{"data.vocab_size", "100"}});
  const core::ExperimentConfig d = train_test::tiny_config({{"data.synthetic.seed", "7"}});
  CHECK(train::synthetic_key(a) == train::synthetic_key(b));
  CHECK(train::tokenizer_key(a) == train::tokenizer_key(b));
  CHECK(train::synthetic_key(a) == train::synthetic_key(c));
  CHECK(train::tokenizer_key(a) != train::tokenizer_key(c));
  CHECK(train::synthetic_key(a) != train::synthetic_key(d));
  CHECK(train::tokenizer_key(a) != train::tokenizer_key(d));
  train::PreparedData p = train::prepare_data(a, tmp.dir());
  CHECK(fs::exists(tmp.dir() + "/data/" + train::synthetic_key(a) + "/manifest.txt"));
  CHECK(fs::exists(tmp.dir() + "/tokenizer/" + train::tokenizer_key(a) + "/spm.model"));
  CHECK(!p.train_examples.empty());
  CHECK(!p.valid_examples.empty());
  REQUIRE(p.tests.size() == 1);
  CHECK(p.tests[0].name == "test");
  CHECK(p.tests[0].examples.size() == p.tests[0].references.size());
  REQUIRE(p.contrastive.size() == 1);
  CHECK(!p.contrastive[0].examples.empty());
  CHECK(!p.entity_frequency.empty());
  // A second preparation reuses both directories.
  const auto mtime = fs::last_write_time(tmp.dir() + "/tokenizer/" + train::tokenizer_key(a) + "/spm.model");
  train::PreparedData q = train::prepare_data(b, tmp.dir());
  CHECK(fs::last_write_time(tmp.dir() + "/tokenizer/" + train::tokenizer_key(a) + "/spm.model") == mtime);
  CHECK(q.tokenizer->vocab_size() == p.tokenizer->vocab_size());
}

TEST_CASE("gold word alignments: the synthetic test.align, <set>.align beside a test file, and bad ones refused") {
  TempDir tmp;
  const std::string set = tmp.path("sets/extra.tsv");
  write_text(set, "ta bo .\tro bo .\td1\nen ka pi .\tun pi ka .\td1\nul .\that .\td2\n");
  const core::ExperimentConfig c = train_test::tiny_config({{"data.test", "[\"" + set + "\"]"}});
  // No extra.align: the extra set has no gold alignments; the synthetic set has its own.
  train::PreparedData p = train::prepare_data(c, tmp.path("shared"));
  REQUIRE(p.tests.size() == 2);
  CHECK(p.tests[0].alignment_file == tmp.path("shared") + "/data/" + train::synthetic_key(c) + "/test.align");
  REQUIRE(p.tests[0].alignments.size() == p.tests[0].corpus.documents.size());
  CHECK(p.tests[0].alignments[0].size() == p.tests[0].corpus.documents[0].sentences.size());
  CHECK(p.tests[1].alignments.empty());
  CHECK(p.tests[1].alignment_file.empty());

  write_text(tmp.path("sets/extra.align"), "0-0 1-1 2-2\n0-0 1-2 2-1 3-3\n0-0 1?1\n");
  p = train::prepare_data(c, tmp.path("shared"));
  CHECK(p.tests[1].alignment_file == tmp.path("sets/extra.align"));
  REQUIRE(p.tests[1].alignments.size() == 2);
  CHECK(data::format_alignment(p.tests[1].alignments[0][1]) == "0-0 1-2 2-1 3-3");
  CHECK(data::format_alignment(p.tests[1].alignments[1][0]) == "0-0 1?1");
  // `mambamt eval --test` reads them the same way.
  CHECK((train::load_test_set(c, *p.tokenizer, set).alignments == p.tests[1].alignments));

  // A link past the end of its sentence, and a line missing: errors naming the file and line.
  write_text(tmp.path("sets/extra.align"), "0-0 1-1 2-2\n0-0 4-1\n0-0\n");
  std::string msg;
  try {
    train::prepare_data(c, tmp.path("shared"));
  } catch (const InputError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Catch::Contains(tmp.path("sets/extra.align") + ":2") && Catch::Contains("link 4-1") &&
                      Catch::Contains("document d1 of " + set));
  write_text(tmp.path("sets/extra.align"), "0-0 1-1 2-2\n0-0\n");
  msg.clear();
  try {
    train::prepare_data(c, tmp.path("shared"));
  } catch (const InputError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Catch::Contains(tmp.path("sets/extra.align") + ":3") &&
                      Catch::Contains("2 alignment lines for a test set of 3 sentences of " + set));
  // `mambamt eval --test` names the test file too.
  msg.clear();
  try {
    train::load_test_set(c, *p.tokenizer, set);
  } catch (const InputError& e) {
    msg = e.what();
  }
  CHECK_THAT(msg, Catch::Contains(tmp.path("sets/extra.align") + ":3") && Catch::Contains("sentences of " + set));
}

TEST_CASE("eval.max_examples caps test sentences: windowed, source-context and sentence-level models see the same text") {
  TempDir tmp;
  // The sentences an example translates (its source-side context left out).
  auto translated = [](const train::TestSet& t) {
    std::vector<std::pair<int32_t, int32_t>> out;
    for (auto& e : t.examples) {
      int32_t skip = e.context;
      for (auto& s : e.spans)
        for (int32_t i = 0; i < s.count; ++i)
          if (skip > 0)
            --skip;
          else
            out.emplace_back(s.doc, s.first + i);
    }
    return out;
  };
  std::vector<std::vector<std::pair<int32_t, int32_t>>> seen;
  std::vector<std::string> texts;
  size_t windows = 0;
  for (auto overrides : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"data.context_sentences", "1"}},
           {{"data.context_sentences", "3"}},
           {{"data.context_sentences", "3"}, {"data.context_side", "\"source\""}}}) {
    overrides.push_back({"eval.max_examples", "7"});
    const core::ExperimentConfig c = train_test::tiny_config(overrides);
    const train::PreparedData p = train::prepare_data(c, tmp.dir());
    REQUIRE(p.tests.size() == 1);
    const train::TestSet& t = p.tests[0];
    REQUIRE(t.tokenized.num_sentences() > 7);
    seen.push_back(translated(t));
    std::string all;
    for (auto& r : t.references) all += r + " ";
    texts.push_back(all);
    if (c.data.context_sentences == 3 && c.data.context_side == "both") windows = t.examples.size();
  }
  // The first seven sentences in document order, each once, for all three.
  std::vector<std::pair<int32_t, int32_t>> first;
  {
    const core::ExperimentConfig c = train_test::tiny_config();
    const train::PreparedData p = train::prepare_data(c, tmp.dir());
    const auto& docs = p.tests[0].tokenized.documents;
    for (int32_t d = 0; d < static_cast<int32_t>(docs.size()) && first.size() < 7; ++d)
      for (int32_t i = 0; i < static_cast<int32_t>(docs[d].sentences.size()) && first.size() < 7; ++i)
        first.emplace_back(d, i);
  }
  CHECK(seen[0] == first);
  CHECK(seen[1] == first);
  CHECK(seen[2] == first);
  CHECK(texts[1] == texts[0]);
  CHECK(texts[2] == texts[0]);
  // Windows of up to 3 sentences: fewer examples than sentences.
  CHECK(windows < 7);
  CHECK(windows >= 3);
}

TEST_CASE("training and evaluation write every store name of docs/STORE.md and a completed store is not rewritten",
          "[slow]") {
  TempDir tmp;
  const std::string dir = tmp.path("exp");
  // COMET by the stand-in comet-score (tests/train/comet): what the evaluation
  // writes where COMET runs.
  ScopedEnv path("PATH", path_with_comet_standin().c_str());
  ScopedEnv keep("COMET_STANDIN_KEEP", tmp.path("comet_inputs").c_str());
  // Two hypotheses per test segment (the beam is 2): hyp/test.nbest.txt.
  const core::ExperimentConfig c = train_test::tiny_config({{"eval.nbest", "2"}});
  train::RunResult r = run(c, dir, /*eval=*/true);
  REQUIRE(r.state == core::RunState::completed);
  auto s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s.status.state == core::RunState::completed);
  CHECK(s.status.step == c.train.max_steps);
  CHECK(s.experiment_id == c.id());
  CHECK(core::parse_experiment(s.config, "store") == c);
  for (const char* m : {"train_loss", "lr", "grad_norm", "tokens_per_s", "padding_fraction", "memory_mb", "valid_loss"}) {
    INFO(m);
    REQUIRE(s.metrics.count(m));
    CHECK(!s.metrics[m].empty());
    for (auto& p : s.metrics[m]) CHECK(std::isfinite(p.value));
  }
  CHECK(s.metrics["train_loss"].size() == static_cast<size_t>(c.train.max_steps / c.train.log_every));
  for (const char* k : {"test/bleu", "test/chrf", "test/chrfpp", "test/bleu_ci_low", "test/bleu_ci_high",
                        "test/chrf_ci_low", "test/chrf_ci_high", "contrastive/accuracy", "entities/recall",
                        "efficiency/params", "efficiency/train_tokens_per_s", "efficiency/decode_tokens_per_s",
                        "efficiency/ms_per_token", "efficiency/peak_memory_mb", "valid/best_loss", "valid/best_step",
                        "alignment/aer", "alignment/aer_best_layer", "alignment/aer_all_layers"}) {
    INFO(k);
    REQUIRE(s.scalars.count(k));
    CHECK(std::isfinite(s.scalars[k]));
  }
  CHECK(s.scalars["test/bleu_ci_low"] <= s.scalars["test/bleu_ci_high"]);
  CHECK(s.scalars["contrastive/accuracy"] >= 0);
  CHECK(s.scalars["contrastive/accuracy"] <= 1);
  auto table = [&](const std::string& name, const std::vector<std::string>& cols) {
    INFO(name);
    REQUIRE(s.tables.count(name));
    const auto& t = s.tables[name];
    CHECK(t.columns == cols);
    CHECK(!t.rows.empty());
    return t;
  };
  table("alignment/by_layer", {"aer", "precision", "recall", "links", "gold_links", "sentences"});
  auto by_len = table("test/by_length", {"bleu", "chrf", "n", "mean_src_len"});
  CHECK(by_len.rows == std::vector<std::string>{"1-8", "9-16", "17-32", "33+"});
  table("contrastive/by_pronoun", {"accuracy", "n"});
  // Each example's outcome, in the set's order: they sum to the accuracy, and
  // their distances to the distance buckets' counts.
  auto outcomes = table("contrastive/examples", {"correct", "distance"});
  double right = 0;
  std::map<std::string, double> per_bucket;
  for (size_t r = 0; r < outcomes.rows.size(); ++r) {
    CHECK(outcomes.rows[r] == std::to_string(r));
    CHECK((outcomes.at(r, 0) == 0 || outcomes.at(r, 0) == 1));
    right += outcomes.at(r, 0);
    per_bucket[results::distance_bucket_label(results::distance_bucket_index(static_cast<int64_t>(outcomes.at(r, 1))))] += 1;
  }
  CHECK(right / static_cast<double>(outcomes.rows.size()) == Approx(s.scalars["contrastive/accuracy"]));
  REQUIRE(s.texts.count("data.contrastive"));
  CHECK_THAT(s.texts["data.contrastive"],
             Catch::EndsWith(" (" + std::to_string(outcomes.rows.size()) + " examples)"));
  auto dist = table("contrastive/by_distance", {"accuracy", "n"});
  CHECK(dist.rows == std::vector<std::string>{"0", "1", "2", "3", ">3"});
  for (size_t r = 0; r < dist.rows.size(); ++r) CHECK(dist.at(r, 1) == per_bucket[dist.rows[r]]);
  auto ent = table("entities/by_frequency", {"recall", "n", "consistency", "consistency_n"});
  CHECK(ent.rows == std::vector<std::string>{"unseen", "1-15", "16+"});
  // Consistency: a share (NaN only when no repeated entity was rendered), over
  // the (document, entity) pairs the buckets count.
  REQUIRE(s.scalars.count("entities/consistency"));
  REQUIRE(s.scalars.count("entities/consistency_n"));
  const double consistency = s.scalars["entities/consistency"];
  const double rendered = s.scalars["entities/consistency_n"];
  CHECK(ent.at(0, 3) + ent.at(1, 3) + ent.at(2, 3) == rendered);
  if (rendered > 0) {
    CHECK(consistency >= 0);
    CHECK(consistency <= 1);
  } else {
    CHECK(std::isnan(consistency));
  }
  // Per document: the documents of the test examples, summing to the totals.
  auto by_doc = table("entities/by_document", {"consistent", "rendered", "repeated"});
  double doc_rendered = 0, doc_consistent = 0;
  for (size_t r = 0; r < by_doc.rows.size(); ++r) {
    doc_consistent += by_doc.at(r, 0);
    doc_rendered += by_doc.at(r, 1);
  }
  CHECK(doc_rendered == rendered);
  if (rendered > 0) CHECK(doc_consistent / doc_rendered == Approx(consistency));
  REQUIRE(s.texts.count("data.entities"));
  CHECK_THAT(s.texts["data.entities"], Catch::StartsWith("test " + s.texts["data.test.test"] + ", the first ") &&
                                           Catch::EndsWith(" sentences translated"));
  auto ex = table("extrapolation/by_length", {"bleu", "chrf", "n", "mean_src_len"});
  CHECK(ex.rows == std::vector<std::string>{"1x", "2x", "4x"});
  auto mem = table("efficiency/memory_by_length", {"train_memory_mb", "decode_state_mb"});
  CHECK(mem.rows.size() == 3);
  // The text trained, validated and scored on: "<16 hex digits> (<n> documents, <m> sentences)".
  for (const char* k : {"data.train", "data.valid", "data.test.test"}) {
    INFO(k);
    REQUIRE(s.texts.count(k));
    const std::string& v = s.texts[k];
    CHECK(v.find_first_not_of("0123456789abcdef") == 16);
    CHECK_THAT(v, Catch::Contains(" documents, ") && Catch::EndsWith(" sentences)"));
  }
  CHECK(s.texts["data.train"] != s.texts["data.test.test"]);
  // Per-segment statistics: as many segments as hypotheses, summing to the corpus scores.
  REQUIRE(s.tables.count("test/segments"));
  const results::SegmentStats seg = results::segment_stats(s.tables["test/segments"]);
  size_t hyp_lines = 0;
  std::ifstream hyp_file(dir + "/hyp/test.txt");
  for (std::string line; std::getline(hyp_file, line);) ++hyp_lines;
  CHECK(hyp_lines > 0);
  CHECK(seg.bleu.size() == hyp_lines);
  CHECK(results::bleu_from_stats(results::sum_bleu_stats(seg.bleu)).score == Approx(s.scalars["test/bleu"]).epsilon(1e-9));
  CHECK(results::chrf_from_stats(results::sum_chrf_stats(seg.chrf)).score == Approx(s.scalars["test/chrf"]).epsilon(1e-9));
  // The tiny model translates windows of 2 sentences: it is scored sentence by
  // sentence as well, one row per sentence of its windows, against those
  // sentences as references (the segments of a model that translates single
  // sentences), each window's translation cut into its sentences.
  {
    const train::PreparedData data = train::prepare_data(c, tmp.path("shared"));
    REQUIRE(data.tests.size() == 1);
    const auto& t = data.tests[0];
    std::vector<std::string> sentence_refs;
    int64_t windows = 0;
    for (const auto& e : t.examples) {
      const auto r = data::target_sentences(t.corpus, e);
      sentence_refs.insert(sentence_refs.end(), r.begin(), r.end());
      windows += r.size() > 1 ? 1 : 0;
    }
    REQUIRE(windows > 0);
    REQUIRE(s.tables.count("test/sentence_segments"));
    const results::SegmentStats by_sentence = results::segment_stats(s.tables["test/sentence_segments"]);
    CHECK(by_sentence.bleu.size() == sentence_refs.size());
    // COMET of the windows and of their sentences, each a segment's score
    // per row, the system score their mean (the stand-in prints 4 decimals).
    const results::StoreSegments stored = results::store_segments(s, "test");
    REQUIRE(stored.own);
    REQUIRE(stored.by_sentence);
    REQUIRE(stored.own->comet.size() == seg.bleu.size());
    REQUIRE(stored.by_sentence->comet.size() == sentence_refs.size());
    auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
    CHECK(s.scalars.at("test/comet") == Approx(mean(stored.own->comet)).margin(1e-4));
    CHECK(s.scalars.at("test/sentence_comet") == Approx(mean(stored.by_sentence->comet)).margin(1e-4));
    // What COMET was given: first the windows (their translations against
    // the hypothesis file), then each window's sentences, their own source
    // and reference sentences, as many translated sentences.
    auto lines_of = [](const std::string& path) {
      std::vector<std::string> out;
      std::ifstream in(path);
      for (std::string l; std::getline(in, l);) out.push_back(l);
      return out;
    };
    std::vector<std::string> sentence_sources;
    for (const auto& e : t.examples) {
      const auto src = data::source_sentences(t.corpus, e);
      CHECK(src.size() == data::target_sentences(t.corpus, e).size());
      sentence_sources.insert(sentence_sources.end(), src.begin(), src.end());
    }
    const std::string inputs = tmp.path("comet_inputs") + "/";
    CHECK(lines_of(inputs + "0.hyp") == lines_of(dir + "/hyp/test.txt"));
    CHECK(lines_of(inputs + "0.ref").size() == seg.bleu.size());
    CHECK(lines_of(inputs + "1.src") == sentence_sources);
    CHECK(lines_of(inputs + "1.ref") == sentence_refs);
    CHECK(lines_of(inputs + "1.hyp").size() == sentence_refs.size());
    CHECK_FALSE(fs::exists(inputs + "2.src"));  // two calls
    CHECK(by_sentence.bleu.size() > seg.bleu.size());
    const results::ReferenceStreams streams{sentence_refs};
    const results::SegmentStats refs_scored = results::segment_stats(results::segment_table(
        results::bleu_corpus_segment_stats(sentence_refs, streams, {}),
        results::chrf_corpus_segment_stats(sentence_refs, streams, {}), {}));
    CHECK(by_sentence.same_references(refs_scored));
    REQUIRE(s.scalars.count("test/sentence_bleu"));
    CHECK(s.scalars["test/sentence_bleu"] ==
          Approx(results::bleu_from_stats(results::sum_bleu_stats(by_sentence.bleu)).score).epsilon(1e-9));
    // Every hypothesis word is in one sentence: as many as in the windows'.
    int64_t words_by_window = 0, words_by_sentence = 0;
    for (const auto& b : seg.bleu) words_by_window += b.sys_len;
    for (const auto& b : by_sentence.bleu) words_by_sentence += b.sys_len;
    CHECK(words_by_sentence == words_by_window);
    REQUIRE(s.scalars.count("test/passages_split_by_separator"));
    const double split = s.scalars["test/passages_split_by_separator"];
    CHECK(split >= 0);
    CHECK(split <= 1);
  }
  // Heatmaps of the first short test sentences (the tiny hybrid has cross-attention).
  for (int k = 0; k < 3; ++k) {
    INFO("explain " << k);
    const std::string p = "explain/" + std::to_string(k) + "/";
    REQUIRE(s.tables.count(p + "occlusion"));
    REQUIRE(s.tables.count(p + "attention"));
    const auto& occ = s.tables[p + "occlusion"];
    const auto& att = s.tables[p + "attention"];
    CHECK(occ.rows == att.rows);
    CHECK(occ.columns == att.columns);
    REQUIRE(!occ.columns.empty());
    CHECK(occ.columns.back() == "</s>");
    CHECK(occ.rows.back() == "</s>");
    CHECK(occ.columns.size() <= 40);
    for (size_t r = 0; r < att.rows.size(); ++r) {
      double sum = 0;
      for (size_t c = 0; c < att.columns.size(); ++c) {
        sum += att.at(r, c);
        CHECK(occ.at(r, c) >= 0);
      }
      CHECK(sum == Approx(1.0).epsilon(1e-5));
    }
  }
  CHECK_FALSE(s.tables.count("explain/3/occlusion"));
  CHECK_THAT(s.texts["comet"], Catch::StartsWith("scored by comet-score (its default model) on the ") &&
                                   Catch::EndsWith("PU, segment by segment"));
  for (const char* k : {"host", "torch", "device"}) CHECK(s.system.count(k));
  CHECK(s.system.at("cpu_kernels") == mambamt::kernels::cpu_isa());
  // Hypotheses: one line per test segment (the buckets' counts add up to them).
  REQUIRE(fs::exists(dir + "/hyp/test.txt"));
  double segments = 0;
  for (size_t i = 0; i < by_len.rows.size(); ++i) segments += by_len.at(i, 2);
  CHECK(count_lines(dir + "/hyp/test.txt") == static_cast<int64_t>(segments));
  CHECK(fs::exists(dir + "/log.txt"));
  // The n-best lists: "<segment> ||| <text> ||| <score> ||| <log_prob>", each
  // segment's 1 or 2 entries best first, the first one its hypothesis.
  {
    std::vector<std::string> best;
    std::ifstream hyp(dir + "/hyp/test.txt");
    for (std::string l; std::getline(hyp, l);) best.push_back(l);
    std::ifstream nb(dir + "/hyp/test.nbest.txt");
    REQUIRE(nb.good());
    std::vector<int> per_segment(best.size(), 0);
    double last_score = 0;
    int64_t last_segment = -1;
    int two = 0;
    for (std::string l; std::getline(nb, l);) {
      INFO(l);
      const size_t a = l.find(" ||| "), b = l.find(" ||| ", a + 5), c3 = l.find(" ||| ", b + 5);
      REQUIRE(c3 != std::string::npos);
      const int64_t segment = std::stoll(l.substr(0, a));
      const std::string text = l.substr(a + 5, b - a - 5);
      const double score = std::stod(l.substr(b + 5, c3 - b - 5)), log_prob = std::stod(l.substr(c3 + 5));
      REQUIRE(segment >= 0);
      REQUIRE(segment < static_cast<int64_t>(best.size()));
      CHECK(segment >= last_segment);
      CHECK(score <= 0);
      CHECK(log_prob <= score);  // divided by a length of at least 1
      if (segment == last_segment) {
        CHECK(score <= last_score);
        ++two;
      } else {
        CHECK(text == best[static_cast<size_t>(segment)]);
      }
      ++per_segment[static_cast<size_t>(segment)];
      last_segment = segment;
      last_score = score;
    }
    for (int n : per_segment) CHECK((n == 1 || n == 2));
    CHECK(two > 0);
  }

  // What the evaluation writes (the results of the same training without
  // evaluation left out) is what evaluation version 7 wrote. When this fails,
  // completed sweeps hold results of another shape than a new evaluation
  // writes: raise core::kEvaluationVersion (core/store.h, with a line in its
  // log) so that `mambamt sweep --reevaluate` redoes them, then update the
  // version and the names here.
  {
    run(c, tmp.path("trained_only"), false);
    std::set<std::string> evaluation_names = result_names(s);
    for (const std::string& n : result_names(core::ExperimentStore::read(tmp.path("trained_only") + "/store.h5")))
      evaluation_names.erase(n);
    const std::set<std::string> version_7 = {
        "scalar alignment/aer",
        "scalar alignment/aer_all_layers",
        "scalar alignment/aer_best_layer",
        "scalar alignment/occlusion_aer",
        "scalar contrastive/accuracy",
        "scalar efficiency/decode_tokens_per_s",
        "scalar efficiency/ms_per_token",
        "scalar efficiency/params",
        "scalar efficiency/peak_memory_mb",
        "scalar efficiency/train_tokens_per_s",
        "scalar entities/consistency",
        "scalar entities/consistency_n",
        "scalar entities/recall",
        "scalar evaluation/version",
        "scalar test/bleu",
        "scalar test/bleu_ci_high",
        "scalar test/bleu_ci_low",
        "scalar test/chrf",
        "scalar test/chrf_ci_high",
        "scalar test/chrf_ci_low",
        "scalar test/chrfpp",
        "scalar test/comet",
        "scalar test/passages_split_by_separator",
        "scalar test/sentence_bleu",
        "scalar test/sentence_comet",
        "scalar test/ter",
        "table alignment/by_layer (aer,precision,recall,links,gold_links,sentences)",
        "table alignment/sentences (predicted,sure,sure_hits,possible_hits)",
        "table contrastive/by_distance (accuracy,n)",
        "table contrastive/by_phenomenon (accuracy,n)",
        "table contrastive/by_pronoun (accuracy,n)",
        "table contrastive/examples (correct,distance)",
        "table efficiency/memory_by_length (train_memory_mb,decode_state_mb)",
        "table entities/by_document (consistent,rendered,repeated)",
        "table entities/by_frequency (recall,n,consistency,consistency_n)",
        "table explain/0/attention",
        "table explain/0/occlusion",
        "table explain/1/attention",
        "table explain/1/occlusion",
        "table explain/2/attention",
        "table explain/2/occlusion",
        "table extrapolation/by_length (bleu,chrf,n,mean_src_len)",
        "table test/by_length (bleu,chrf,n,mean_src_len)",
        "table test/comet_segments (comet)",
        "table test/segments (bleu_sys_len,bleu_ref_len,bleu_match_1,bleu_match_2,bleu_match_3,bleu_match_4,"
        "bleu_total_1,bleu_total_2,bleu_total_3,bleu_total_4,chrf_c1_hyp,chrf_c1_ref,chrf_c1_match,"
        "chrf_c2_hyp,chrf_c2_ref,chrf_c2_match,chrf_c3_hyp,chrf_c3_ref,chrf_c3_match,chrf_c4_hyp,"
        "chrf_c4_ref,chrf_c4_match,chrf_c5_hyp,chrf_c5_ref,chrf_c5_match,chrf_c6_hyp,chrf_c6_ref,"
        "chrf_c6_match)",
        "table test/sentence_segments (bleu_sys_len,bleu_ref_len,bleu_match_1,bleu_match_2,bleu_match_3,"
        "bleu_match_4,bleu_total_1,bleu_total_2,bleu_total_3,bleu_total_4,chrf_c1_hyp,chrf_c1_ref,chrf_c1_match,"
        "chrf_c2_hyp,chrf_c2_ref,chrf_c2_match,chrf_c3_hyp,chrf_c3_ref,chrf_c3_match,chrf_c4_hyp,"
        "chrf_c4_ref,chrf_c4_match,chrf_c5_hyp,chrf_c5_ref,chrf_c5_match,chrf_c6_hyp,chrf_c6_ref,"
        "chrf_c6_match)",
        "table test/sentence_comet_segments (comet)",
        "text alignment",
        "text comet",
        "text data.alignment",
        "text data.contrastive",
        "text data.entities",
        "text data.test.test",
        "text signature.test.bleu",
        "text signature.test.chrf",
        "text signature.test.chrfpp",
        "text signature.test.ter",
        "text weights",
    };
    std::string unlisted, gone;
    for (const std::string& n : evaluation_names)
      if (!version_7.count(n)) unlisted += "\n  \"" + n + "\",";
    for (const std::string& n : version_7)
      if (!evaluation_names.count(n)) gone += "\n  " + n;
    INFO("written but not by version 7:" << unlisted);
    INFO("written by version 7 but not now:" << gone);
    CHECK(unlisted.empty());
    CHECK(gone.empty());
    CHECK(core::kEvaluationVersion == 7);
    // The signatures are sacreBLEU's, with the scorer's version.
    CHECK(s.texts.at("signature.test.bleu") ==
          "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|" + results::signature_version_field());
    CHECK(s.texts.at("signature.test.ter") ==
          "nrefs:1|case:lc|tok:tercom|norm:no|punct:yes|asian:no|" + results::signature_version_field());
    CHECK(s.scalars.at("test/ter") >= 0);
    // The attention layers as built, written by the training: 1:7 of 2 layers is 1 of 2.
    CHECK(s.texts.at("model.attention") == "1/2 (1:1)");
    CHECK(s.texts.at("weights") == dir + "/ckpt/best.h5");  // eval.average_last = 1: the best checkpoint
  }

  // Running it again changes nothing.
  const std::string before = read_text(dir + "/store.h5");
  const auto steps = core::CheckpointDir(dir + "/ckpt").steps();
  train::RunResult again = run(c, dir, true);
  CHECK(again.state == core::RunState::completed);
  CHECK(again.step == c.train.max_steps);
  CHECK(read_text(dir + "/store.h5") == before);
  CHECK(core::CheckpointDir(dir + "/ckpt").steps() == steps);

  // `mambamt eval` on an extra TSV test file, and `mambamt translate`.
  {
    // A test file in the corpus's own language: reuse two lines of the synthetic test split.
    std::ifstream in(tmp.path("shared") + "/data/" + train::synthetic_key(c) + "/test.tsv");
    std::string l1, l2;
    std::getline(in, l1);
    std::getline(in, l2);
    // Two one-sentence documents (src<TAB>tgt, a blank line between them).
    auto pair = [](const std::string& l) { return l.substr(0, l.find('\t', l.find('\t') + 1)); };
    write_text(tmp.path("extra.tsv"), pair(l1) + "\n\n" + pair(l2) + "\n");
  }
  // The training's evaluation recorded its version; an extra set alone is not
  // the whole suite, so it leaves the version (made older here) as it was.
  CHECK(core::ExperimentStore::read(dir + "/store.h5").scalars.at("evaluation/version") == core::kEvaluationVersion);
  {
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    store.set_scalar("evaluation/version", 0);
    store.commit();
  }
  CommandResult e = run_shell(mambamt_binary() + " eval --store " + dir + " --test " + tmp.path("extra.tsv"));
  INFO(e.output);
  CHECK(e.code == 0);
  auto s2 = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s2.scalars.count("extra/bleu"));
  CHECK(s2.scalars.count("test/bleu"));
  CHECK(s2.scalars.at("evaluation/version") == 0);
  CHECK(count_lines(dir + "/hyp/extra.txt") == 2);
  // The synthetic corpus has no file format: any file given to it is TSV.
  write_text(tmp.path("more.txt"), read_text(tmp.path("extra.tsv")));
  CommandResult more = run_shell(mambamt_binary() + " eval --store " + dir + " --test " + tmp.path("more.txt"));
  INFO(more.output);
  CHECK(more.code == 0);
  CHECK(core::ExperimentStore::read(dir + "/store.h5").scalars.at("more/bleu") == s2.scalars.at("extra/bleu"));
  write_text(tmp.path("in.txt"), "ta ul pa\n\nen ta\n");
  // stdout only: run_shell adds 2>&1 after the command, so the log lines go away inside a subshell.
  auto translate = [&](const std::string& options) {
    return run_shell("(" + mambamt_binary() + " translate --store " + dir + " " + options + " < " + tmp.path("in.txt") +
                     " 2>/dev/null)");
  };
  CommandResult t = translate("--nbest 1");
  CHECK(t.code == 0);
  CHECK(std::count(t.output.begin(), t.output.end(), '\n') == 3);
  CommandResult best = translate("--nbest 1 --weights best");
  CHECK(best.code == 0);
  CHECK(std::count(best.output.begin(), best.output.end(), '\n') == 3);
  // The experiment's eval.nbest = 2 by default: the lines of the two
  // non-empty inputs (0 and 2), best first, the first as translated alone.
  auto lines_of = [](const std::string& text) {
    std::vector<std::string> out;
    std::istringstream in(text);
    for (std::string l; std::getline(in, l);) out.push_back(l);
    return out;
  };
  const std::vector<std::string> plain = lines_of(t.output);
  CommandResult nbest = translate("");
  CHECK(nbest.code == 0);
  const std::vector<std::string> lists = lines_of(nbest.output);
  REQUIRE(lists.size() == 4);
  CHECK_THAT(lists[0], Catch::StartsWith("0 ||| " + plain[0] + " ||| "));
  CHECK_THAT(lists[1], Catch::StartsWith("0 ||| "));
  CHECK_THAT(lists[2], Catch::StartsWith("2 ||| " + plain[2] + " ||| "));
  CHECK_THAT(lists[3], Catch::StartsWith("2 ||| "));
  // A wider beam gives up to 4; greedy search (--beam 1) is beam search with one hypothesis.
  CommandResult four = translate("--beam 4 --nbest 4 --batch 1");
  CHECK(four.code == 0);
  CHECK(lines_of(four.output).size() > 4);
  CHECK(lines_of(four.output).size() <= 8);
  CommandResult greedy = translate("--beam 1");
  CHECK(greedy.code == 0);
  CHECK(lines_of(greedy.output).size() == 3);
  // Errors (on stderr) before any translation.
  CommandResult too_many = run_shell(mambamt_binary() + " translate --store " + dir + " --nbest 3 < /dev/null");
  CHECK(too_many.code == 2);
  CHECK_THAT(too_many.output, Catch::Contains("--nbest 3 exceeds the beam size 2 (eval.beam_size; --beam N to widen it)"));
  CommandResult bad_penalty = run_shell(mambamt_binary() + " translate --store " + dir + " --length-penalty fast < /dev/null");
  CHECK(bad_penalty.code == 2);
  CHECK_THAT(bad_penalty.output, Catch::Contains("--length-penalty fast: expected a number"));
  CommandResult weights = run_shell(mambamt_binary() + " translate --store " + dir + " --weights newest < /dev/null");
  CHECK(weights.code == 2);
  CHECK_THAT(weights.output, Catch::Contains("--weights newest: use default, best or latest"));
  CommandResult gate = run_shell(mambamt_binary() + " translate --store " + dir + " --gate-skip 0.5 < /dev/null");
  CHECK(gate.code == 2);
  CHECK_THAT(gate.output, Catch::Contains("--gate-skip: " + dir + " has no gated cross-attention (model.cross_attn = \"full\""));
  CommandResult gate_range = run_shell(mambamt_binary() + " translate --store " + dir + " --gate-skip 2 < /dev/null");
  CHECK(gate_range.code == 2);
  CHECK_THAT(gate_range.output, Catch::Contains("--gate-skip must be in [0, 1]"));
  CommandResult no_store = run_shell(mambamt_binary() + " explain --weights best < /dev/null");
  CHECK(no_store.code == 2);
  CHECK_THAT(no_store.output, Catch::Contains("--store DIR is required"));
  CommandResult bad = run_shell(mambamt_binary() + " eval --store " + tmp.path("nothing"));
  CHECK(bad.code == 1);
  CHECK_THAT(bad.output, Catch::Contains("no experiment store"));
  CommandResult usage = run_shell(mambamt_binary() + " eval --test x");
  CHECK(usage.code == 2);
  // --device is checked alike by train, eval, translate and explain.
  const std::vector<std::string> with_bad_device = {" eval --store " + dir + " --device tpu",
                                                    " translate --store " + dir + " --device tpu < /dev/null"};
  for (const std::string& cmd : with_bad_device) {
    CommandResult dev = run_shell(mambamt_binary() + cmd);
    INFO(cmd << "\n" << dev.output);
    CHECK(dev.code == 2);
    CHECK_THAT(dev.output, Catch::Contains("--device tpu: use auto, cpu or cuda"));
  }
}

TEST_CASE("a windowed experiment decoding in context is scored over single sentences and translates documents") {
  TempDir tmp;
  const std::string dir = tmp.path("exp");
  core::ExperimentConfig c = train_test::tiny_config(
      {{"data.sentence_steps", "4"}, {"data.multi_resolution", "true"}, {"eval.doc_decode", "\"sentences\""}});
  c.eval.extrapolation = false;
  train::RunResult r = run(c, dir, /*eval=*/true);
  INFO(r.error);
  REQUIRE(r.state == core::RunState::completed);
  // One hypothesis per test sentence, not per window.
  const train::PreparedData data = train::prepare_data(c, tmp.path("shared"));
  REQUIRE(data.tests.size() == 1);
  const auto& t = data.tests[0];
  CHECK(static_cast<int64_t>(t.examples.size()) == std::min<int64_t>(t.tokenized.num_sentences(), c.eval.max_examples));
  for (auto& e : t.examples) CHECK(e.sentences() == 1);
  CHECK(count_lines(dir + "/hyp/test.txt") == static_cast<int64_t>(t.examples.size()));
  auto s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(std::isfinite(s.scalars["test/bleu"]));
  CHECK(std::isfinite(s.scalars["contrastive/accuracy"]));
  // Its segments are sentences: BLEU by sentence is its BLEU, and there is no second table.
  CHECK(s.scalars.at("test/sentence_bleu") == s.scalars["test/bleu"]);
  CHECK_FALSE(s.tables.count("test/sentence_segments"));

  // `translate`: one sentence per line, a blank line between documents; a
  // document's first sentence is translated as if alone, a later one after
  // the sentences before it.
  train::LoadedExperiment exp = train::load_experiment(dir, "cpu");
  const auto out = train::translate_lines(exp, {"ta ul pa", "en ta", "", "ul pa ta", "  ", "en ta"});
  REQUIRE(out.size() == 6);
  CHECK(out[2].empty());
  CHECK(out[4].empty());
  CHECK(out[3] == train::translate_lines(exp, {"ul pa ta"})[0]);
  CHECK(out[5] == train::translate_lines(exp, {"en ta"})[0]);
  CHECK(out[1] == train::translate_lines(exp, {"ta ul pa", "en ta"})[1]);
  CHECK(out[0] == train::translate_lines(exp, {"ta ul pa"})[0]);
}

TEST_CASE("re-evaluating a store of an older evaluation version runs only the parts that changed since") {
  // The parts each version changed, as --reevaluate reads them.
  CHECK(train::eval_parts_named(core::evaluation_parts_changed_since(0)).whole());
  CHECK(core::evaluation_parts_changed_since(core::kEvaluationVersion).empty());
  for (int64_t v = 0; v < core::kEvaluationVersion; ++v) {
    INFO("version " << v);
    CHECK_FALSE(core::evaluation_parts_changed_since(v).empty());  // a raised version names what it changed
    CHECK_NOTHROW(train::eval_parts_named(core::evaluation_parts_changed_since(v)));
  }
  CHECK(core::evaluation_parts_changed_since(5) == std::set<std::string>{"test_sets"});
  CHECK(core::evaluation_parts_changed_since(4) == std::set<std::string>{"test_sets"});
  CHECK(core::evaluation_parts_changed_since(3) == std::set<std::string>{"alignment", "test_sets"});
  const train::EvalParts only = train::eval_parts_named({"alignment"});
  CHECK(only.alignment);
  CHECK_FALSE(only.test_sets);
  CHECK_FALSE(only.efficiency);
  CHECK_FALSE(only.whole());
  CHECK_THROWS_WITH(train::eval_parts_named({"alignment", "bleu"}), Catch::Contains("`bleu`"));

  TempDir tmp;
  const std::string dir = tmp.path("exp");
  // The last two of the checkpoints kept (steps 8 and 12) averaged: the store says which.
  const core::ExperimentConfig c = train_test::tiny_config({{"eval.average_last", "2"}});
  REQUIRE(run(c, dir, /*eval=*/true).state == core::RunState::completed);
  CHECK(core::ExperimentStore::read(dir + "/store.h5").texts.at("weights") == "mean of steps 8 12");
  // Marks of what a re-evaluation would overwrite: the AER (the alignment
  // part, changed at version 3), the decoding speed (efficiency, unchanged
  // since version 1) and BLEU (test sets, changed at version 5).
  auto mark = [&](int64_t version) {
    core::ExperimentStore store = core::ExperimentStore::open(dir + "/store.h5");
    store.set_scalar("evaluation/version", static_cast<double>(version));
    store.set_scalar("alignment/aer", 7);
    store.set_scalar("efficiency/decode_tokens_per_s", 7);
    store.set_scalar("test/bleu", 7);
    store.commit();
  };
  train::EvalRequest req;
  req.exp_dir = dir;
  req.device = "cpu";
  req.changed_parts_only = true;

  // Version 4: the test sets only.
  mark(4);
  REQUIRE(train::evaluate_experiment(req));
  core::StoreSnapshot s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s.scalars.at("evaluation/version") == core::kEvaluationVersion);
  CHECK(s.scalars.at("test/bleu") != 7);  // evaluated again
  CHECK(s.tables.count("test/sentence_segments"));
  CHECK(s.scalars.at("alignment/aer") == 7);  // left as they were
  CHECK(s.scalars.at("efficiency/decode_tokens_per_s") == 7);

  // Version 3: the alignment and the test sets.
  mark(3);
  REQUIRE(train::evaluate_experiment(req));
  s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s.scalars.at("evaluation/version") == core::kEvaluationVersion);
  CHECK(s.scalars.at("alignment/aer") < 1);  // evaluated again
  CHECK(s.scalars.at("test/bleu") != 7);
  const core::ResultTable& layers = s.tables.at("alignment/by_layer");
  const auto held = std::find(layers.rows.begin(), layers.rows.end(), "held-out layer");
  REQUIRE(held != layers.rows.end());
  CHECK(s.scalars.at("alignment/aer") == layers.at(static_cast<size_t>(held - layers.rows.begin()), 0));
  CHECK(s.scalars.at("efficiency/decode_tokens_per_s") == 7);  // left as it was

  // Up to date: nothing to do, the store untouched.
  const std::string before = read_text(dir + "/store.h5");
  REQUIRE(train::evaluate_experiment(req));
  CHECK(read_text(dir + "/store.h5") == before);

  // From before version 2: the whole suite.
  mark(0);
  REQUIRE(train::evaluate_experiment(req));
  s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s.scalars.at("evaluation/version") == core::kEvaluationVersion);
  CHECK(s.scalars.at("alignment/aer") < 1);
  CHECK(s.scalars.at("efficiency/decode_tokens_per_s") != 7);
  CHECK(s.scalars.at("test/bleu") != 7);
}

// MAMBAMT_CUDA_GRAPHS is the switch of CUDA graphs in evaluation (outside the
// config, whose every key is part of the experiment's id).
TEST_CASE("search_options takes MAMBAMT_CUDA_GRAPHS from the environment", "[train]") {
  const char* before = std::getenv("MAMBAMT_CUDA_GRAPHS");
  const std::optional<std::string> saved = before ? std::optional<std::string>(before) : std::nullopt;
  const core::EvalConfig eval;
  auto graphs_with = [&](const char* value) {
    if (value)
      ::setenv("MAMBAMT_CUDA_GRAPHS", value, 1);
    else
      ::unsetenv("MAMBAMT_CUDA_GRAPHS");
    return train::search_options(eval, 4).cuda_graphs;
  };
  CHECK_FALSE(graphs_with(nullptr));
  CHECK_FALSE(graphs_with(""));
  CHECK_FALSE(graphs_with("0"));
  CHECK(graphs_with("1"));
  CHECK_THROWS_WITH(graphs_with("yes"), Catch::Contains("MAMBAMT_CUDA_GRAPHS=yes: expected 0 or 1"));
  if (saved)
    ::setenv("MAMBAMT_CUDA_GRAPHS", saved->c_str(), 1);
  else
    ::unsetenv("MAMBAMT_CUDA_GRAPHS");
}
