// The RNNsearch and RetNet baselines through the training runtime: a short
// run_experiment on the synthetic corpus learns (validation loss far below
// the untrained model's and the uniform loss, test chrF above the untrained
// model's), and the trained experiment loads and translates like any other.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "core/store.h"
#include "models/registry.h"
#include "results/chrf.h"
#include "train/decode.h"
#include "train/experiment.h"
#include "train/prepare.h"
#include "train/translate.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

struct Quality {
  double nll = 0;   // teacher-forced validation loss per target token
  double chrf = 0;  // greedy test-set chrF
};

Quality quality(models::TranslationModel& model, const core::ExperimentConfig& c, const train::PreparedData& data) {
  model.eval();
  const data::SpecialIds& ids = data.tokenizer->specials();
  const train::NllSum nll =
      train::teacher_forced_nll(model, data.valid_examples, ids, c.data.max_tokens, torch::kCPU, false);
  const train::TestSet& test = data.tests.at(0);
  const auto hyps = train::translate_examples(model, test.examples, ids, train::search_options(c.eval, 1),
                                              c.eval.batch_tokens, torch::kCPU);
  std::vector<std::string> texts;
  for (const auto& h : hyps) texts.push_back(train::hypothesis_text(*data.tokenizer, h));
  Quality q;
  q.nll = nll.nll / static_cast<double>(nll.tokens);
  q.chrf = results::corpus_chrf(texts, {test.references}).score;
  return q;
}

// Trains `kind` briefly on single sentences of the tiny synthetic corpus and
// compares it with the same model untrained.
void learns(const std::string& kind, const std::vector<std::pair<std::string, std::string>>& extra) {
  TempDir tmp;
  std::vector<std::pair<std::string, std::string>> o = {
      {"model.kind", "\"" + kind + "\""}, {"model.d_model", "64"},       {"model.dropout", "0.0"},
      {"data.context_sentences", "0"},    {"train.lr", "0.01"},          {"train.warmup_steps", "10"},
      {"train.max_steps", "300"},         {"train.validate_every", "300"}, {"train.checkpoint_every", "300"},
      {"train.log_every", "10"},          {"eval.max_examples", "0"},    {"train.threads", "1"}};
  for (auto& e : extra) o.push_back(e);
  const core::ExperimentConfig c = train_test::tiny_config(o);
  train::RunOptions ro;
  ro.exp_dir = tmp.path("exp");
  ro.shared_dir = tmp.path("shared");
  ro.skip_evaluation = true;
  const train::RunResult r = train::run_experiment(c, ro);
  INFO(r.error);
  REQUIRE(r.state == core::RunState::completed);

  const train::PreparedData data = train::prepare_data(c, ro.shared_dir);
  REQUIRE(!data.tests.empty());
  models::ModelContext ctx;
  ctx.vocab_size = data.tokenizer->vocab_size();
  torch::manual_seed(c.train.seed);
  models::ModelPtr untrained = models::build_model(c.model, ctx);
  const Quality before = quality(*untrained, c, data);

  train::LoadedExperiment exp = train::load_experiment(ro.exp_dir, "cpu", train::Weights::kLatest);
  CHECK(exp.model->kind() == kind);
  const Quality after = quality(*exp.model, c, data);
  const double uniform = std::log(static_cast<double>(ctx.vocab_size));
  INFO(kind << ": validation loss " << before.nll << " -> " << after.nll << " (uniform " << uniform << "), chrF "
            << before.chrf << " -> " << after.chrf);
  CHECK(after.nll < 0.6 * uniform);
  CHECK(after.nll < 0.6 * before.nll);
  CHECK(after.chrf > before.chrf + 10);

  // The experiment's own translation path works on it.
  const auto out = train::translate_lines(exp, {"ta ul pa", ""});
  REQUIRE(out.size() == 2);
  CHECK(out[1].empty());
}

}  // namespace

TEST_CASE("rnnsearch learns the synthetic corpus: validation loss far below the untrained and uniform loss, "
          "test chrF above the untrained model's",
          "[slow]") {
  learns("rnnsearch", {});
}

TEST_CASE("retnet learns the synthetic corpus: validation loss far below the untrained and uniform loss, "
          "test chrF above the untrained model's",
          "[slow]") {
  learns("retnet", {{"model.n_heads", "4"}, {"model.dec_layers", "2"}});
}
