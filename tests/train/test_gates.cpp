// The evaluation of gated cross-attention: the gates' statistics on the test
// references (gates/*), eval.gate_skip applied while it decodes and restored
// after, and a loaded experiment (what `translate` uses) skipping by its
// threshold.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <set>
#include <string>

#include "core/fs.h"
#include "core/store.h"
#include "models/layers.h"
#include "train/evaluate.h"
#include "train/experiment.h"
#include "train/prepare.h"
#include "train/translate.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

// The skip_below of every gated cross-attention module of a model.
std::set<double> skip_values(torch::nn::Module& m) {
  std::set<double> out;
  for (auto* c : models::gated_cross_attention(m)) out.insert(c->skip_below);
  return out;
}

// Evaluates a trained experiment's model under `config` into a new store
// <dir>/<name>.h5 (the test sets and the gates only) and reads it back.
core::StoreSnapshot evaluate_into(train::LoadedExperiment& exp, const core::ExperimentConfig& config,
                                  const train::PreparedData& data, const std::string& dir, const std::string& name) {
  core::StoreIdentity ident;
  ident.experiment_id = config.id();
  ident.name = name;
  ident.config = config.canonical();
  core::make_dirs(dir);
  const std::string path = dir + "/" + name + ".h5";
  {
    core::ExperimentStore store = core::ExperimentStore::create(path, ident);
    train::EvalParts parts;
    parts.contrastive = parts.entities = parts.extrapolation = parts.efficiency = parts.explain = parts.alignment = false;
    train::evaluate(*exp.model, config, data, exp.device, store, dir + "/" + name, {}, parts);
    store.commit();
  }
  return core::ExperimentStore::read(path);
}

}  // namespace

TEST_CASE("evaluation measures the cross-attention gates and skips by eval.gate_skip", "[slow]") {
  TempDir tmp;
  const std::string dir = tmp.path("exp");
  const core::ExperimentConfig c = train_test::tiny_config(
      {{"model.cross_attn", "\"gated\""}, {"model.cross_attn_every", "1"}, {"eval.gate_skip", "0.5"}});
  train::RunOptions o;
  o.exp_dir = dir;
  o.shared_dir = tmp.path("shared");
  train::RunResult r = train::run_experiment(c, o);
  INFO(r.error);
  REQUIRE(r.state == core::RunState::completed);
  const train::PreparedData data = train::prepare_data(c, tmp.path("shared"));
  int64_t tokens = 0;
  for (const auto& e : data.tests[0].examples) tokens += static_cast<int64_t>(e.tgt.size()) + 1;  // bos + target

  // The same model evaluated without skipping: every gated layer, every
  // reference token of the first test set.
  train::LoadedExperiment exp = train::load_experiment(dir, "cpu");
  CHECK(skip_values(*exp.model) == std::set<double>{0.5});  // what `translate` decodes with
  core::ExperimentConfig open = c;
  open.eval.gate_skip = 0;
  CHECK(open.training_id() == c.training_id());
  auto s = evaluate_into(exp, open, data, tmp.path("eval"), "open");
  CHECK(skip_values(*exp.model) == std::set<double>{0.5});  // restored after the evaluation
  REQUIRE(s.tables.count("gates/by_layer"));
  const auto& layers = s.tables["gates/by_layer"];
  CHECK(layers.columns == std::vector<std::string>{"mean", "below_0.01", "below_0.05", "below_0.1", "below_0.2",
                                                   "below_0.5", "skipped", "n"});
  REQUIRE(static_cast<int64_t>(layers.rows.size()) == c.model.dec_layers);
  CHECK(layers.rows.front() == "decoder.0.cross");
  for (size_t i = 0; i < layers.rows.size(); ++i) {
    INFO(layers.rows[i]);
    CHECK(layers.at(i, 0) > 0);
    CHECK(layers.at(i, 0) < 1);
    for (size_t k = 2; k <= 5; ++k) CHECK(layers.at(i, k - 1) <= layers.at(i, k));  // shares below rising thresholds
    CHECK(layers.at(i, 6) == 0);
    CHECK(layers.at(i, 7) == tokens);
  }
  CHECK(s.scalars["gates/skipped"] == 0);
  CHECK(s.scalars["gates/skip_threshold"] == 0);
  CHECK(s.scalars["gates/translations_skipped"] == 0);
  CHECK(s.scalars["gates/translations_mean"] > 0);
  CHECK(s.scalars["gates/translations_mean"] < 1);
  CHECK(s.scalars["gates/mean"] > 0);

  // The experiment's own evaluation skipped below 0.5: its first gated layer
  // (whose input no skipping changes) skipped the tokens whose gate is below 0.5.
  auto own = core::ExperimentStore::read(dir + "/store.h5");
  REQUIRE(own.tables.count("gates/by_layer"));
  const auto& ol = own.tables["gates/by_layer"];
  REQUIRE(ol.rows == layers.rows);
  CHECK(ol.at(0, 6) == layers.at(0, 5));
  CHECK(ol.at(0, 6) == ol.at(0, 5));
  CHECK(own.scalars["gates/skip_threshold"] == 0.5);
  REQUIRE(own.scalars.count("gates/translations_skipped"));
  CHECK(own.scalars["gates/translations_skipped"] >= 0);
  CHECK(own.scalars["gates/translations_skipped"] <= 1);
  // gates/skipped pools the layers' tokens.
  double skipped = 0, n = 0;
  for (size_t i = 0; i < ol.rows.size(); ++i) {
    skipped += ol.at(i, 6) * ol.at(i, 7);
    n += ol.at(i, 7);
  }
  CHECK(own.scalars["gates/skipped"] == Approx(skipped / n));

  // eval.gate_skip = 1: every gate is below it (the model test shows the
  // decoder then gives every source the same logits).
  core::ExperimentConfig blind = c;
  blind.eval.gate_skip = 1.0;
  auto b = evaluate_into(exp, blind, data, tmp.path("eval"), "blind");
  CHECK(b.scalars["gates/skipped"] == 1);
  CHECK(b.tables["gates/by_layer"].at(0, 6) == 1);
  CHECK(b.scalars["gates/translations_skipped"] == 1);
  CHECK(std::isfinite(b.scalars["test/bleu"]));

  // `mambamt eval --test` on another set leaves the experiment's gate statistics as they were.
  write_text(tmp.path("extra.tsv"), "ta ul pa\tta ul pa\nen ta\ten ta\n");
  CommandResult extra = run_shell(mambamt_binary() + " eval --store " + dir + " --test " + tmp.path("extra.tsv"));
  INFO(extra.output);
  CHECK(extra.code == 0);
  auto after = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(std::isfinite(after.scalars.at("extra/bleu")));
  CHECK(after.tables["gates/by_layer"].values == ol.values);
  CHECK(after.scalars["gates/translations_skipped"] == own.scalars["gates/translations_skipped"]);

  // `mambamt translate --gate-skip` on the gated experiment.
  write_text(tmp.path("in.txt"), "ta ul pa\nen ta\n");
  CommandResult t = run_shell(mambamt_binary() + " translate --store " + dir + " --gate-skip 1 < " + tmp.path("in.txt"));
  INFO(t.output);
  CHECK(t.code == 0);
  CHECK_THAT(t.output, Catch::Contains("cross-attention skipped below gate 1"));
}

TEST_CASE("models without gated cross-attention store no gate statistics", "[slow]") {
  TempDir tmp;
  const std::string dir = tmp.path("exp");
  core::ExperimentConfig c = train_test::tiny_config({{"train.max_steps", "4"}});
  c.eval.contrastive = c.eval.entity_recall = c.eval.extrapolation = false;
  train::RunOptions o;
  o.exp_dir = dir;
  o.shared_dir = tmp.path("shared");
  train::RunResult r = train::run_experiment(c, o);
  REQUIRE(r.state == core::RunState::completed);
  auto s = core::ExperimentStore::read(dir + "/store.h5");
  CHECK(s.tables.count("gates/by_layer") == 0);
  CHECK(s.scalars.count("gates/mean") == 0);
  CHECK(s.metrics.count("gate_mean") == 0);
  CHECK(std::isfinite(s.scalars["test/bleu"]));
}

TEST_CASE("train.gate_penalty closes the gates of gated cross-attention", "[slow]") {
  TempDir tmp;
  auto train_with = [&](const std::string& penalty) {
    core::ExperimentConfig c = train_test::tiny_config(
        {{"model.cross_attn", "\"gated\""}, {"model.cross_attn_every", "1"}, {"train.gate_penalty", penalty}});
    c.eval.contrastive = c.eval.entity_recall = c.eval.extrapolation = false;
    train::RunOptions o;
    o.exp_dir = tmp.path("exp-" + penalty);
    o.shared_dir = tmp.path("shared");
    train::RunResult r = train::run_experiment(c, o);
    INFO(r.error);
    REQUIRE(r.state == core::RunState::completed);
    return core::ExperimentStore::read(o.exp_dir + "/store.h5");
  };
  auto none = train_with("0.0");
  auto strong = train_with("5.0");
  // The gate_mean metric: every log interval, a gate's share in (0, 1).
  for (auto* s : {&none, &strong}) {
    REQUIRE(s->metrics.count("gate_mean"));
    CHECK(s->metrics["gate_mean"].size() == s->metrics["train_loss"].size());
    for (auto& p : s->metrics["gate_mean"]) {
      CHECK(p.value > 0);
      CHECK(p.value < 1);
    }
  }
  // The gates start half open either way (bias 0); the penalty pushes them shut.
  CHECK(strong.metrics["gate_mean"].front().value < 0.51);
  CHECK(strong.metrics["gate_mean"].back().value < strong.metrics["gate_mean"].front().value);
  CHECK(strong.metrics["gate_mean"].back().value < none.metrics["gate_mean"].back().value);
  CHECK(strong.scalars["gates/mean"] < none.scalars["gates/mean"]);
  // It changes the training, so the experiment.
  CHECK(train_test::tiny_config({{"model.cross_attn", "\"gated\""}, {"train.gate_penalty", "5.0"}}).training_id() !=
        train_test::tiny_config({{"model.cross_attn", "\"gated\""}}).training_id());
}

TEST_CASE("train.gate_penalty_warmup: update s trains with the share s / warmup of the penalty") {
  TempDir tmp;
  auto train = [&](const std::string& penalty, const std::string& warmup, int steps) {
    const core::ExperimentConfig c = train_test::tiny_config({{"model.cross_attn", "\"gated\""},
                                                              {"model.cross_attn_every", "1"},
                                                              {"train.gate_penalty", penalty},
                                                              {"train.gate_penalty_warmup", warmup},
                                                              {"train.max_steps", std::to_string(steps)}});
    train::RunOptions o;
    o.exp_dir = tmp.path("exp-" + penalty + "-" + warmup + "-" + std::to_string(steps));
    o.shared_dir = tmp.path("shared");
    o.skip_evaluation = true;
    const train::RunResult r = train::run_experiment(c, o);
    INFO(r.error);
    REQUIRE(r.state == core::RunState::completed);
    return train_test::final_parameters(o.exp_dir);
  };
  // Update 1 of a warmup of 4 weighs 8 as 2: the same update as a constant 2.
  CHECK(train_test::compare_parameters(train("8.0", "4", 1), train("2.0", "0", 1)) == "");
  CHECK(train_test::compare_parameters(train("8.0", "4", 1), train("0.0", "0", 1)) != "");
  // Update 2 weighs it as 4: no longer the constant 2.
  CHECK(train_test::compare_parameters(train("8.0", "4", 2), train("2.0", "0", 2)) != "");
  CHECK(train_test::compare_parameters(train("4.0", "0", 2), train("2.0", "0", 2)) != "");
}
