// A sweep's points that differ only in evaluation settings share one training
// (RunOptions::train_from): the checkpoints are linked, the training metrics
// copied, only the evaluation runs; anything that is not the same training
// trains as usual.
#include <catch2/catch.hpp>
#include <sys/stat.h>

#include <filesystem>

#include "core/checkpoint.h"
#include "core/store.h"
#include "train/experiment.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

train::RunResult run(const core::ExperimentConfig& c, const std::string& dir, const std::string& shared,
                     const std::string& train_from = "") {
  train::RunOptions o;
  o.exp_dir = dir;
  o.shared_dir = shared;
  o.train_from = train_from;
  return train::run_experiment(c, o);
}

ino_t inode(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return st.st_ino;
}

}  // namespace

TEST_CASE("training ids ignore the evaluation settings training does not read") {
  const core::ExperimentConfig a = train_test::tiny_config();
  const core::ExperimentConfig beam = train_test::tiny_config({{"eval.beam_size", "4"}, {"eval.nbest", "2"}});
  const core::ExperimentConfig lp = train_test::tiny_config({{"eval.length_penalty", "0.6"}, {"eval.max_examples", "3"}});
  const core::ExperimentConfig len = train_test::tiny_config({{"eval.max_len_a", "2.0"}});
  const core::ExperimentConfig seed = train_test::tiny_config({{"train.seed", "9"}});
  const core::ExperimentConfig avg = train_test::tiny_config({{"eval.average_last", "2"}});
  CHECK(a.id() != beam.id());
  CHECK(a.training_id() == beam.training_id());
  CHECK(a.training_id() == lp.training_id());
  CHECK(a.training_id() != seed.training_id());
  CHECK(a.training_id() != avg.training_id());  // which checkpoints are kept and averaged
  CHECK(a.training_id() != a.id());
  // Validation decodes with max_len_a only when it picks the best checkpoint by BLEU.
  REQUIRE(a.train.valid_metric == "loss");
  CHECK(a.training_id() == len.training_id());
  const core::ExperimentConfig bleu = train_test::tiny_config({{"train.valid_metric", "\"bleu\""}});
  const core::ExperimentConfig bleu_len =
      train_test::tiny_config({{"train.valid_metric", "\"bleu\""}, {"eval.max_len_a", "2.0"}});
  CHECK(bleu.training_id() != bleu_len.training_id());
}

TEST_CASE("an experiment of the same training takes over the checkpoints and evaluates them, another trains") {
  TempDir tmp;
  const std::string shared = tmp.path("shared");
  const core::ExperimentConfig a = train_test::tiny_config();
  const core::ExperimentConfig b = train_test::tiny_config({{"eval.beam_size", "1"}});
  REQUIRE(a.training_id() == b.training_id());
  const std::string da = tmp.path(a.id()), db = tmp.path(b.id());
  REQUIRE(run(a, da, shared).state == core::RunState::completed);
  const auto sa = core::ExperimentStore::read(da + "/store.h5");

  train::RunResult rb = run(b, db, shared, da);
  INFO(rb.error);
  REQUIRE(rb.state == core::RunState::completed);
  CHECK(rb.step == a.train.max_steps);
  const auto sb = core::ExperimentStore::read(db + "/store.h5");
  CHECK(sb.experiment_id == b.id());
  CHECK_THAT(sb.texts.at("training"), Catch::StartsWith("shared with experiment " + a.id() + " (" + da + ")"));
  CHECK_FALSE(sa.texts.count("training"));
  // The same checkpoint files (links), training metrics and training facts.
  core::CheckpointDir ca(da + "/ckpt"), cb(db + "/ckpt");
  REQUIRE(!ca.steps().empty());
  CHECK(cb.steps() == ca.steps());
  for (int64_t step : ca.steps()) CHECK(inode(cb.path_for_step(step)) == inode(ca.path_for_step(step)));
  CHECK(inode(cb.best_path()) == inode(ca.best_path()));
  for (const char* m : {"train_loss", "lr", "valid_loss"}) {
    INFO(m);
    REQUIRE(sb.metrics.count(m));
    REQUIRE(sb.metrics.at(m).size() == sa.metrics.at(m).size());
    for (size_t i = 0; i < sa.metrics.at(m).size(); ++i) {
      CHECK(sb.metrics.at(m)[i].step == sa.metrics.at(m)[i].step);
      CHECK(sb.metrics.at(m)[i].value == sa.metrics.at(m)[i].value);
    }
  }
  for (const char* k : {"efficiency/train_tokens_per_s", "efficiency/peak_memory_mb", "valid/best_loss", "valid/best_step"})
    CHECK(sb.scalars.at(k) == sa.scalars.at(k));
  // Its own evaluation, with its own search (greedy here, beam 2 there).
  CHECK(sb.scalars.count("test/bleu"));
  CHECK(fs::exists(db + "/hyp/test.txt"));
  CHECK(sb.texts.at("data.train") == sa.texts.at("data.train"));

  // Its store lost, b starts again from the linked checkpoints of a: they are
  // of the same training, so the resume takes them and trains nothing more.
  fs::remove(db + "/store.h5");
  train::RunResult again = run(b, db, shared);
  INFO(again.error);
  CHECK(again.state == core::RunState::completed);
  CHECK_THAT(core::read_text(db + "/log.txt"), Catch::Contains("resumed from " + cb.path_for_step(ca.steps().back())));
  CHECK(core::ExperimentStore::read(db + "/store.h5").scalars.at("test/bleu") == sb.scalars.at("test/bleu"));
  CHECK(cb.steps() == ca.steps());

  // Another training (another seed) given a's directory trains itself.
  const core::ExperimentConfig c = train_test::tiny_config({{"train.seed", "9"}, {"eval.beam_size", "1"}});
  const std::string dc = tmp.path(c.id());
  train::RunResult rc = run(c, dc, shared, da);
  CHECK(rc.state == core::RunState::completed);
  const auto sc = core::ExperimentStore::read(dc + "/store.h5");
  CHECK_FALSE(sc.texts.count("training"));
  CHECK_THAT(core::read_text(dc + "/log.txt"), Catch::Contains("not sharing the training of " + da + ": its training differs"));
  core::CheckpointDir cc(dc + "/ckpt");
  REQUIRE(!cc.steps().empty());
  CHECK(inode(cc.path_for_step(cc.steps().back())) != inode(ca.path_for_step(ca.steps().back())));
}
