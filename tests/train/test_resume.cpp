// Invariant 4: resume is exact. N steps straight equal k steps, a stop (the
// checkpoint signal mid-step, or SIGKILL of the process at a random moment),
// and N-k more: bitwise-equal parameters and equal metric series on CPU.
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <random>
#include <thread>

#include "core/checkpoint.h"
#include "core/error.h"
#include "core/signals.h"
#include "core/store.h"
#include "data/corpus.h"
#include "train/prepare.h"
#include "train/experiment.h"
#include "skip.h"
#include "train_helpers.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

train::RunResult run(const core::ExperimentConfig& c, const std::string& dir,
                     std::function<void(int64_t, const std::string&)> hook = {}) {
  train::RunOptions o;
  o.exp_dir = dir;
  o.skip_evaluation = true;
  o.on_step_point = std::move(hook);
  return train::run_experiment(c, o);
}

// The checkpoint signal arrives while step `at` computes its gradients: the
// step finishes, is checkpointed, and the run returns interrupted.
train::RunResult run_stopped_at(const core::ExperimentConfig& c, const std::string& dir, int64_t at) {
  core::install_stop_handlers("USR2");
  train::RunResult r = run(c, dir, [at](int64_t step, const std::string& point) {
    if (step == at && point == "backward") ::raise(SIGUSR2);
  });
  core::uninstall_stop_handlers();
  core::reset_stop_request();
  return r;
}

std::vector<double> series(const std::string& dir, const std::string& name, std::vector<int64_t>* steps = nullptr) {
  auto s = core::ExperimentStore::read(dir + "/store.h5");
  std::vector<double> out;
  for (auto& p : s.metrics[name]) {
    out.push_back(p.value);
    if (steps) steps->push_back(p.step);
  }
  return out;
}

// Starts `mambamt train` in the background; returns its pid.
pid_t spawn_train(const std::string& config, const std::string& out, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    const std::string bin = mambamt_binary();
    ::execl(bin.c_str(), bin.c_str(), "train", config.c_str(), "--out", out.c_str(), "--no-eval", (char*)nullptr);
    ::_exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid) {
  int st = 0;
  ::waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

}  // namespace

TEST_CASE("resume is exact: a checkpoint signal mid-step, then the rest, equals a straight run") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config();
  const std::string straight = tmp.path("straight"), stopped = tmp.path("stopped");
  REQUIRE(run(c, straight).state == core::RunState::completed);

  train::RunResult r = run_stopped_at(c, stopped, 5);
  CHECK(r.state == core::RunState::interrupted);
  CHECK(r.step == 5);
  core::CheckpointDir ck(stopped + "/ckpt");
  REQUIRE(ck.latest_step());
  CHECK(*ck.latest_step() == 5);
  CHECK(core::ExperimentStore::read(stopped + "/store.h5").status.state == core::RunState::interrupted);

  train::RunResult r2 = run(c, stopped);
  CHECK(r2.state == core::RunState::completed);
  CHECK(r2.step == c.train.max_steps);
  CHECK(train_test::compare_parameters(train_test::final_parameters(straight), train_test::final_parameters(stopped)) ==
        "");
  // The metric series are the same too (same steps, same values).
  for (const char* m : {"train_loss", "lr", "grad_norm", "padding_fraction", "valid_loss"}) {
    INFO(m);
    std::vector<int64_t> s1, s2;
    auto a = series(straight, m, &s1), b = series(stopped, m, &s2);
    CHECK(s1 == s2);
    CHECK(a == b);
  }
  auto st = core::ExperimentStore::read(stopped + "/store.h5").status;
  CHECK(st.attempts == 2);
}

TEST_CASE("a damaged newest checkpoint is set aside and the run resumes from the one before it, exactly") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config();
  REQUIRE(c.train.checkpoint_every == 4);
  const std::string straight = tmp.path("straight"), stopped = tmp.path("stopped");
  REQUIRE(run(c, straight).state == core::RunState::completed);

  train::RunResult r = run_stopped_at(c, stopped, 5);
  REQUIRE(r.state == core::RunState::interrupted);
  core::CheckpointDir ck(stopped + "/ckpt");
  REQUIRE(ck.steps() == std::vector<int64_t>({4, 5}));
  // Step 5's file loses its end (a disk or filesystem fault: our writes are atomic).
  const std::string p5 = ck.path_for_step(5);
  const std::string damaged = read_text(p5).substr(0, 2000);
  write_text(p5, damaged);

  train::RunResult r2 = run(c, stopped);
  INFO(r2.error);
  REQUIRE(r2.state == core::RunState::completed);
  CHECK(train_test::compare_parameters(train_test::final_parameters(straight), train_test::final_parameters(stopped)) ==
        "");
  for (const char* m : {"train_loss", "lr", "grad_norm", "valid_loss"}) {
    INFO(m);
    std::vector<int64_t> s1, s2;
    auto a = series(straight, m, &s1), b = series(stopped, m, &s2);
    CHECK(s1 == s2);
    CHECK(a == b);
  }
  // The damaged file is kept beside the others, with its bytes.
  CHECK(read_text(p5 + ".unreadable") == damaged);
  const std::string log = read_text(stopped + "/log.txt");
  CHECK_THAT(log, Catch::Contains("a checkpoint does not read back: " + p5));
  CHECK_THAT(log, Catch::Contains("(set aside as " + p5 + ".unreadable)"));
  CHECK_THAT(log, Catch::Contains("resumed from " + ck.path_for_step(4)));
}

TEST_CASE("a damaged best.h5 is copied again from the best step's file at resume") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config();
  REQUIRE(c.train.validate_every == 6);
  const std::string dir = tmp.path("exp");
  // Stopped at step 7: the validation at step 6 was the best so far.
  REQUIRE(run_stopped_at(c, dir, 7).state == core::RunState::interrupted);
  core::CheckpointDir ck(dir + "/ckpt");
  REQUIRE(fs::exists(ck.path_for_step(6)));
  const std::string best = ck.best_path();
  REQUIRE(read_text(best) == read_text(ck.path_for_step(6)));
  const std::string damaged = read_text(best).substr(0, 2000);
  write_text(best, damaged);

  train::RunResult r = run(c, dir);
  INFO(r.error);
  REQUIRE(r.state == core::RunState::completed);
  CHECK(read_text(best + ".unreadable") == damaged);
  CHECK_THAT(read_text(dir + "/log.txt"), Catch::Contains("the best checkpoint does not open: " + best) &&
                                              Catch::Contains("copied again from " + ck.path_for_step(6)));
  CHECK(core::read_checkpoint(best).ints.at("step") >= 6);
}

TEST_CASE("a resume on changed validation text fails the experiment, naming both fingerprints, and keeps its checkpoints") {
  TempDir tmp;
  // A user TSV corpus: the synthetic corpus's splits copied out.
  const core::ExperimentConfig synthetic = train_test::tiny_config();
  train::prepare_data(synthetic, tmp.path("synthetic"), false);
  const std::string data_dir = tmp.path("synthetic") + "/data/" + train::synthetic_key(synthetic);
  const std::string train_tsv = tmp.path("train.tsv"), valid_tsv = tmp.path("valid.tsv");
  write_text(train_tsv, read_text(data_dir + "/train.tsv"));
  const std::string valid_text = read_text(data_dir + "/valid.tsv");
  write_text(valid_tsv, valid_text);
  const core::ExperimentConfig c = train_test::tiny_config(
      {{"data.corpus", "\"tsv\""}, {"data.train", "\"" + train_tsv + "\""}, {"data.valid", "\"" + valid_tsv + "\""}});
  const std::string dir = tmp.path("exp");
  REQUIRE(run_stopped_at(c, dir, 5).state == core::RunState::interrupted);
  // The store names the text trained and validated on.
  data::CorpusOptions o;
  o.format = "tsv";
  o.path = valid_tsv;
  const std::string before = data::corpus_fingerprint(data::read_corpus(o));
  auto texts = core::ExperimentStore::read(dir + "/store.h5").texts;
  CHECK_THAT(texts["data.valid"], Catch::StartsWith(before + " ("));
  CHECK_THAT(texts["data.train"], Catch::EndsWith(" sentences)"));

  // One validation reference edited: the checkpoints were validated (and the
  // best one chosen) on the old text.
  std::string edited = valid_text;
  const size_t tab = edited.find('\t');
  edited.insert(tab + 1, "edited ");
  write_text(valid_tsv, edited);
  const std::string after = data::corpus_fingerprint(data::read_corpus(o));
  REQUIRE(after != before);
  core::CheckpointDir ck(dir + "/ckpt");
  const std::vector<int64_t> steps = ck.steps();
  const std::string step5 = read_text(ck.path_for_step(5));
  train::RunResult r = run(c, dir);
  CHECK(r.state == core::RunState::failed);
  CHECK(r.error == ck.path_for_step(5) + ": this checkpoint was trained on other valid data than " + valid_tsv +
                       " holds now (corpus fingerprint " + before + " then, " + after +
                       " now): put the corpus back as it was, or train the experiment afresh in another directory");
  CHECK(ck.steps() == steps);
  CHECK(read_text(ck.path_for_step(5)) == step5);
  CHECK(core::ExperimentStore::read(dir + "/store.h5").texts["data.valid"] == texts["data.valid"]);

  // Put back, the experiment resumes and completes.
  write_text(valid_tsv, valid_text);
  train::RunResult r2 = run(c, dir);
  INFO(r2.error);
  CHECK(r2.state == core::RunState::completed);
}

TEST_CASE("resume is exact after SIGKILL of `mambamt train` at a random moment", "[slow]") {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> over{
      {"train.max_steps", "30"}, {"train.checkpoint_every", "3"}, {"train.validate_every", "10"}};
  const std::string cfg = train_test::write_config(tmp.dir(), "kill", over);
  const std::string straight = tmp.path("straight"), killed = tmp.path("killed");
  int straight_ms = 0;
  {
    const auto t0 = std::chrono::steady_clock::now();
    pid_t pid = spawn_train(cfg, straight, tmp.path("straight.log"));
    REQUIRE(wait_exit(pid) == 0);
    straight_ms = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
  }
  std::mt19937 rng(std::random_device{}());
  int kills = 0;
  int run_ms = straight_ms;  // how long a whole run takes, as last measured
  for (int attempt = 0; attempt < 20; ++attempt) {
    pid_t pid = spawn_train(cfg, killed, tmp.path("killed.log"));
    // Kill it at a random moment within the time a whole run took (a fixed
    // range of moments outlasted the whole run on a fast machine, and no
    // kill happened).
    const auto t0 = std::chrono::steady_clock::now();
    const int wait_ms = std::uniform_int_distribution<int>(run_ms / 10, run_ms * 9 / 10)(rng);
    INFO("a whole run took " << run_ms << " ms; kill after " << wait_ms << " ms");
    bool exited = false;
    int code = 0;
    while (std::chrono::steady_clock::now() - t0 < std::chrono::milliseconds(wait_ms)) {
      int st = 0;
      if (::waitpid(pid, &st, WNOHANG) == pid) {
        exited = true;
        code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (exited) {
      INFO(read_text(tmp.path("killed.log")));
      REQUIRE(code == 0);
      if (kills > 0) break;  // resumed after a kill and finished
      // Finished before the kill: this run went faster than the straight
      // one (which shared the machine with a busier moment, say). Again
      // from nothing, within the time this one took.
      run_ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0).count());
      fs::remove_all(killed);
      continue;
    }
    ::kill(pid, SIGKILL);
    wait_exit(pid);
    ++kills;
    // The store stays readable after every kill.
    if (fs::exists(killed + "/store.h5")) CHECK_NOTHROW(core::ExperimentStore::read(killed + "/store.h5"));
    if (kills >= 3) {
      pid_t last = spawn_train(cfg, killed, tmp.path("killed.log"));
      INFO(read_text(tmp.path("killed.log")));
      REQUIRE(wait_exit(last) == 0);
      break;
    }
  }
  CHECK(kills >= 1);
  auto st = core::ExperimentStore::read(killed + "/store.h5").status;
  CHECK(st.state == core::RunState::completed);
  CHECK(train_test::compare_parameters(train_test::final_parameters(straight), train_test::final_parameters(killed)) ==
        "");
  std::vector<int64_t> s1, s2;
  CHECK(series(straight, "train_loss", &s1) == series(killed, "train_loss", &s2));
  CHECK(s1 == s2);
}

TEST_CASE("SIGUSR2 to `mambamt train` checkpoints, exits 3, and the resumed run matches", "[slow]") {
  TempDir tmp;
  const std::vector<std::pair<std::string, std::string>> over{{"train.max_steps", "40"}, {"train.checkpoint_every", "100"}};
  const std::string cfg = train_test::write_config(tmp.dir(), "usr2", over);
  const std::string straight = tmp.path("straight"), stopped = tmp.path("stopped");
  REQUIRE(wait_exit(spawn_train(cfg, straight, tmp.path("a.log"))) == 0);
  pid_t pid = spawn_train(cfg, stopped, tmp.path("b.log"));
  // Wait until training runs (the first metrics are committed), then signal.
  for (int i = 0; i < 3000; ++i) {
    if (fs::exists(stopped + "/store.h5") && !core::ExperimentStore::read(stopped + "/store.h5").metrics.empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ::kill(pid, SIGUSR2);
  const int code = wait_exit(pid);
  INFO(read_text(tmp.path("b.log")));
  if (code == 0) MAMBAMT_SKIP("the run finished before the signal arrived: nothing was resumed");
  REQUIRE(code == 3);
  auto st = core::ExperimentStore::read(stopped + "/store.h5").status;
  CHECK(st.state == core::RunState::interrupted);
  core::CheckpointDir ck(stopped + "/ckpt");
  REQUIRE(ck.latest_step());
  CHECK(*ck.latest_step() == st.step);
  CHECK(*ck.latest_step() < 40);
  REQUIRE(wait_exit(spawn_train(cfg, stopped, tmp.path("c.log"))) == 0);
  CHECK(train_test::compare_parameters(train_test::final_parameters(straight), train_test::final_parameters(stopped)) ==
        "");
}

TEST_CASE("two-stage training: the first updates are a sentence-level run, and resume across the switch is exact") {
  TempDir tmp;
  using train_test::compare_parameters;
  using train_test::final_parameters;
  // Four updates of stage one are four updates of the sentence-level twin
  // (same initialisation, same single-sentence batches), not of the windows.
  const std::string staged4 = tmp.path("staged4"), sent4 = tmp.path("sent4"), windows4 = tmp.path("windows4");
  REQUIRE(run(train_test::tiny_config({{"data.sentence_steps", "4"}, {"train.max_steps", "4"}}), staged4).state ==
          core::RunState::completed);
  REQUIRE(run(train_test::tiny_config({{"data.context_sentences", "0"}, {"train.max_steps", "4"}}), sent4).state ==
          core::RunState::completed);
  REQUIRE(run(train_test::tiny_config({{"train.max_steps", "4"}}), windows4).state == core::RunState::completed);
  CHECK(compare_parameters(final_parameters(staged4), final_parameters(sent4)) == "");
  CHECK(compare_parameters(final_parameters(staged4), final_parameters(windows4)) != "");

  // Twelve updates, the switch after the fourth: stopped by the checkpoint
  // signal in step 3 and resumed, the run ends where a straight one does.
  const core::ExperimentConfig c = train_test::tiny_config({{"data.sentence_steps", "4"}});
  const std::string straight = tmp.path("straight"), stopped = tmp.path("stopped"), sent = tmp.path("sent");
  REQUIRE(run(c, straight).state == core::RunState::completed);
  train::RunResult r = run_stopped_at(c, stopped, 3);
  REQUIRE(r.state == core::RunState::interrupted);
  CHECK(r.step == 3);
  REQUIRE(run(c, stopped).state == core::RunState::completed);
  CHECK(compare_parameters(final_parameters(straight), final_parameters(stopped)) == "");
  CHECK(series(straight, "train_loss") == series(stopped, "train_loss"));
  // After the switch it is no longer the sentence-level run.
  REQUIRE(run(train_test::tiny_config({{"data.context_sentences", "0"}}), sent).state == core::RunState::completed);
  CHECK(compare_parameters(final_parameters(straight), final_parameters(sent)) != "");
}

TEST_CASE("resume is exact with gated cross-attention and its ramped-up gate penalty, the gate_mean series included") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config(
      {{"model.cross_attn", "\"gated\""},
       {"model.cross_attn_every", "1"},
       {"train.gate_penalty", "2.0"},
       {"train.gate_penalty_warmup", "8"}});
  const std::string straight = tmp.path("straight"), stopped = tmp.path("stopped");
  REQUIRE(run(c, straight).state == core::RunState::completed);
  // Step 5: inside a log interval (every 2 steps), so the interval's gate sums go through the checkpoint.
  REQUIRE(run_stopped_at(c, stopped, 5).state == core::RunState::interrupted);
  REQUIRE(run(c, stopped).state == core::RunState::completed);
  CHECK(train_test::compare_parameters(train_test::final_parameters(straight), train_test::final_parameters(stopped)) ==
        "");
  for (const char* m : {"train_loss", "gate_mean", "valid_loss"}) {
    INFO(m);
    std::vector<int64_t> s1, s2;
    auto a = series(straight, m, &s1), b = series(stopped, m, &s2);
    CHECK(!a.empty());
    CHECK(s1 == s2);
    CHECK(a == b);
  }
}

TEST_CASE("a best.h5 damaged after its step's file was pruned names --weights latest, which evaluates the newest step") {
  TempDir tmp;
  const core::ExperimentConfig c = train_test::tiny_config();
  const std::string dir = tmp.path("exp");
  REQUIRE(run(c, dir).state == core::RunState::completed);
  core::CheckpointDir ck(dir + "/ckpt");
  // keep_checkpoints 2 (steps 8 and 12 are kept): the best step's file is gone only if the best is older.
  for (int64_t step : ck.steps())
    if (step != *ck.latest_step()) fs::remove(ck.path_for_step(step));
  write_text(ck.best_path(), read_text(ck.best_path()).substr(0, 2000));
  try {
    train::load_experiment(dir, "cpu");
    FAIL("a damaged best.h5 loaded");
  } catch (const mambamt::InputError& e) {
    CHECK_THAT(e.what(), Catch::Contains(ck.best_path()) && Catch::Contains("the best checkpoint is lost") &&
                             Catch::Contains("`--weights latest`") &&
                             Catch::Contains(ck.path_for_step(*ck.latest_step())));
  }
  CHECK(train::load_experiment(dir, "cpu", train::Weights::kLatest).weights == ck.path_for_step(*ck.latest_step()));
  // `mambamt eval --weights latest` evaluates it; a bad value is a usage error.
  CommandResult bad = run_shell(mambamt_binary() + " eval --store " + dir + " --weights newest");
  CHECK(bad.code == 2);
  CHECK_THAT(bad.output, Catch::Contains("--weights newest: use default, best or latest"));
  CommandResult lost = run_shell(mambamt_binary() + " eval --store " + dir + " --test /dev/null");
  CHECK(lost.code == 1);
  CHECK_THAT(lost.output, Catch::Contains("`--weights latest`"));
  write_text(tmp.path("extra.tsv"), "ta ul pa\tta ul pa\nen ta\ten ta\n");
  CommandResult latest = run_shell(mambamt_binary() + " eval --store " + dir + " --weights latest --test " +
                                   tmp.path("extra.tsv"));
  INFO(latest.output);
  CHECK(latest.code == 0);
  CHECK_THAT(latest.output, Catch::Contains("with parameters from " + ck.path_for_step(*ck.latest_step())));
  CHECK(std::isfinite(core::ExperimentStore::read(dir + "/store.h5").scalars.at("extra/bleu")));
}
