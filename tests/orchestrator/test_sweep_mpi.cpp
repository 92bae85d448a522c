// The sweep runtime end to end with real OpenMPI (mpirun --oversubscribe),
// the real binary and real training of tiny models.
#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <regex>
#include <set>
#include <thread>

#include "core/checkpoint.h"
#include "core/config.h"
#include "core/store.h"
#include "orchestrator/grid.h"
#include "orchestrator/rundir.h"
#include "data/sampler.h"
#include "train/prepare.h"
#include "test_util.h"
#include "tiny_grid.h"

using namespace mambamt;
namespace fs = std::filesystem;

namespace {

struct Sweep {
  TempDir tmp;
  std::string grid_path;
  std::string run_dir;
  Sweep(const std::string& grid_section, const std::string& extra_sweep, int max_steps, int checkpoint_every) {
    grid_path = tmp.path("grid.toml");
    run_dir = tmp.path("runs/t");
    write_text(grid_path, "[sweep]\nname = \"t\"\noutput_dir = \"" + tmp.path("runs") +
                              "\"\nheartbeat_seconds = 1.0\n" + extra_sweep + "\n[base]\n" +
                              tiny_base(max_steps, checkpoint_every) + "\n" + grid_section);
  }
};

std::string mpirun(int ranks) {
  return "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_mpi_yield_when_idle=1 "
         "mpirun --oversubscribe -np " + std::to_string(ranks) + " ";
}

std::map<std::string, core::StoreSnapshot> stores(const std::string& run_dir) {
  std::map<std::string, core::StoreSnapshot> out;
  for (auto& e : fs::directory_iterator(run_dir + "/exp")) {
    std::string p = e.path().string() + "/store.h5";
    if (fs::exists(p)) out[e.path().filename().string()] = core::ExperimentStore::read(p);
  }
  return out;
}

// Starts a command in its own process group; returns its pid.
pid_t spawn(const std::string& cmd, const std::string& log) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    execl("/bin/sh", "sh", "-c", (cmd + " > " + log + " 2>&1").c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  return pid;
}

int wait_exit(pid_t pid, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    int st = 0;
    pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ::kill(-pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  return -1;
}

// The pid of the sweep process of `grid` with MPI rank `rank` (from /proc:
// command lines and environments; a test's grid lies in its own temporary
// directory, so another test's or user's sweep is never taken).
pid_t rank_pid(const std::string& grid, int rank) {
  for (auto& e : fs::directory_iterator("/proc")) {
    std::string name = e.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmdline = read_text(e.path().string() + "/cmdline");
    if (cmdline.find("mambamt") == std::string::npos || cmdline.find(std::string("sweep") + '\0' + grid) == std::string::npos)
      continue;
    std::string env = read_text(e.path().string() + "/environ");
    if (env.find(std::string("OMPI_COMM_WORLD_RANK=") + std::to_string(rank) + '\0') != std::string::npos)
      return static_cast<pid_t>(std::stol(name));
  }
  return 0;
}

// Whether the log file at `path` holds `text` within `seconds` (polled every 100 ms).
bool wait_for_log(const std::string& path, const std::string& text, int seconds) {
  for (int i = 0; i < seconds * 10; ++i) {
    if (read_text(path).find(text) != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return false;
}

// After mpirun is gone its ranks may take a moment longer, and while one
// lives it still holds its claims (a resubmission would skip them): waits
// until no sweep process of `grid` of rank 0 or 1 is left (at most a minute).
void wait_ranks_gone(const std::string& grid) {
  for (int i = 0; i < 600 && (rank_pid(grid, 0) > 0 || rank_pid(grid, 1) > 0); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// The id of an experiment still training with a checkpoint no later than
// `max_step` (so that many steps are left before it can complete).
std::string wait_for_checkpoint(const std::string& run_dir, int seconds, int64_t max_step) {
  for (int i = 0; i < seconds * 10; ++i) {
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir + "/exp", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      core::CheckpointDir ck(it->path().string() + "/ckpt");
      const auto steps = ck.steps();
      if (steps.empty() || steps.back() > max_step) continue;
      try {
        auto s = core::ExperimentStore::read(it->path().string() + "/store.h5");
        if (s.status.state == core::RunState::running) return it->path().filename().string();
      } catch (...) {
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return "";
}

struct FileId {
  ino_t inode;
  timespec mtime;
};

FileId file_id(const std::string& path) {
  struct stat st;
  ::stat(path.c_str(), &st);
  return {st.st_ino, st.st_mtim};
}

// Leaves a completed store as an older mambamt would have: an older
// evaluation version (0: before versions named the parts they changed) and a
// BLEU that this evaluation does not compute.
void make_evaluated_by_older(const std::string& store_path, int64_t version = 0) {
  core::ExperimentStore store = core::ExperimentStore::open(store_path);
  store.set_scalar("evaluation/version", static_cast<double>(version));
  store.set_scalar("test/bleu", -1);
  store.set_scalar("efficiency/decode_tokens_per_s", -1);
  store.commit();
}

}  // namespace

TEST_CASE("4 ranks run a 12-point grid: every point completes exactly once", "[orchestrator][mpi]") {
  Sweep s("[grid]\nmodel.d_state = [4, 8, 16]\nmodel.attention_ratio = [0.0, 0.5]\n",
                       "seeds = [1, 2]\nretries = 0\n", 3, 100);
  auto r = run_shell(mpirun(4) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(r.output.substr(r.output.size() > 6000 ? r.output.size() - 6000 : 0));
  REQUIRE(r.code == 0);
  auto all = stores(s.run_dir);
  REQUIRE(all.size() == 12);
  std::set<std::string> hosts;
  for (auto& [id, st] : all) {
    CHECK(st.status.state == core::RunState::completed);
    CHECK(st.status.attempts == 1);
    CHECK(st.status.step == 3);
  }
  // Each experiment was started once, and every rank worked.
  std::regex start_re("start ([0-9a-f]{12}) .* on rank ([0-9]+)");
  std::map<std::string, int> starts;
  std::set<std::string> ranks;
  for (std::sregex_iterator it(r.output.begin(), r.output.end(), start_re), end; it != end; ++it) {
    starts[(*it)[1]]++;
    ranks.insert((*it)[2]);
  }
  CHECK(starts.size() == 12);
  for (auto& [id, n] : starts) CHECK(n == 1);
  CHECK(ranks.size() == 4);
  // Running it again touches nothing.
  std::map<std::string, FileId> before;
  for (auto& [id, st] : all) before[id] = file_id(s.run_dir + "/exp/" + id + "/store.h5");
  auto again = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  CHECK(again.code == 0);
  CHECK(again.output.find(" start ") == std::string::npos);
  for (auto& [id, f] : before) {
    FileId now = file_id(s.run_dir + "/exp/" + id + "/store.h5");
    CHECK(now.inode == f.inode);
    CHECK(now.mtime.tv_nsec == f.mtime.tv_nsec);
  }
  // The status command agrees.
  auto st = run_shell(mambamt_binary() + " status " + s.run_dir);
  CHECK(st.output.find("12 experiments: 12 completed") != std::string::npos);
}

TEST_CASE("a worker killed mid-training: the resubmitted sweep resumes it from its checkpoint", "[orchestrator][mpi]") {
  // 200 steps, killed at a checkpoint of step 100 at the latest: the
  // experiment cannot complete between the store read and the kill.
  Sweep s("[grid]\nmodel.d_state = [4, 8]\n", "seeds = [1]\nretries = 1\n", 200, 4);
  pid_t job = spawn(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path, s.tmp.path("first.log"));
  std::string id = wait_for_checkpoint(s.run_dir, 600, 100);
  REQUIRE(!id.empty());
  core::StoreSnapshot running = core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5");
  REQUIRE(running.status.pid > 0);
  // Kill the process training it (whichever rank that is).
  ::kill(static_cast<pid_t>(running.status.pid), SIGKILL);
  int code = wait_exit(job, 300);
  CHECK(code != 0);
  wait_ranks_gone(s.grid_path);
  int64_t ckpt_step = *core::CheckpointDir(s.run_dir + "/exp/" + id + "/ckpt").latest_step();
  CHECK(ckpt_step > 0);

  auto r = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(r.output.substr(r.output.size() > 6000 ? r.output.size() - 6000 : 0));
  REQUIRE(r.code == 0);
  for (auto& [eid, st] : stores(s.run_dir)) {
    CHECK(st.status.state == core::RunState::completed);
    CHECK(st.status.step == 200);
  }
  core::StoreSnapshot done = core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5");
  CHECK(done.status.attempts == 2);
  std::string log = read_text(s.run_dir + "/exp/" + id + "/log.txt");
  CHECK(log.find("resumed from") != std::string::npos);
  // The resumed attempt continued after the checkpoint instead of starting over.
  auto& loss = done.metrics.at("train_loss");
  std::map<int64_t, int> seen;
  for (auto& p : loss) seen[p.step]++;
  CHECK(seen.count(1) == 1);
  CHECK(seen.at(1) == 1);
}

TEST_CASE("a worker stopped without dying (SIGSTOP): its heartbeat stops, its experiment is marked interrupted and "
          "the sweep goes on",
          "[orchestrator][mpi]") {
  // Two long points first (order = "cost"), one per rank, then a short one.
  // Rank 1's training process is stopped once it has a checkpoint: rank 0's
  // coordinator hears nothing from it for heartbeat_timeout, marks its
  // experiment interrupted, and rank 0 trains the rest. The job then ends every
  // rank (the stopped one would hang MPI_Finalize) with exit 1, and the
  // resubmission resumes the stopped experiment from its checkpoint.
  // heartbeat_seconds is 1 (Sweep), the timeout 4.
  Sweep s("[grid]\ntrain.max_steps = [150, 151, 20]\n",
          "seeds = [1]\nretries = 0\norder = \"cost\"\nheartbeat_timeout = 4.0\n", 150, 10);
  const pid_t job = spawn(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path, s.tmp.path("first.log"));
  std::string stopped_id;
  pid_t stopped = 0;
  for (int i = 0; i < 3000 && stopped == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    const pid_t rank1 = rank_pid(s.grid_path, 1);
    std::error_code ec;
    for (auto it = fs::directory_iterator(s.run_dir + "/exp", ec); rank1 > 0 && !ec && it != fs::directory_iterator();
         it.increment(ec)) {
      if (core::CheckpointDir(it->path().string() + "/ckpt").steps().empty()) continue;
      try {
        const auto st = core::ExperimentStore::read(it->path().string() + "/store.h5");
        if (st.status.state != core::RunState::running || st.status.pid != rank1) continue;
        if (::kill(rank1, SIGSTOP) == 0) {
          stopped = rank1;
          stopped_id = it->path().filename().string();
        }
        break;
      } catch (...) {
      }
    }
  }
  INFO(read_text(s.tmp.path("first.log")));
  REQUIRE(stopped > 0);
  // While rank 0 trains on, the coordinator's mark is in the store. (When the
  // job ends, mpirun's signals reach the stopped rank: it may checkpoint and
  // write a status of its own before it is killed.)
  core::StoreSnapshot marked;
  for (int i = 0; i < 600 && marked.status.state != core::RunState::interrupted; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    try {
      marked = core::ExperimentStore::read(s.run_dir + "/exp/" + stopped_id + "/store.h5");
    } catch (const std::exception&) {  // being committed
    }
  }
  CHECK(marked.status.state == core::RunState::interrupted);
  CHECK(marked.status.last_error.find("rank 1 sent no heartbeat for") != std::string::npos);
  const int code = wait_exit(job, 300);
  ::kill(stopped, SIGKILL);  // gone already with the job, unless mpirun left it
  wait_ranks_gone(s.grid_path);
  const std::string log = read_text(s.tmp.path("first.log"));
  INFO(log);
  CHECK(code == 1);
  CHECK(std::regex_search(log, std::regex("lost " + stopped_id + R"(\b.*: rank 1 sent no heartbeat for)")));
  CHECK(std::regex_search(log, std::regex(R"(sweep \S+: 2 of 3 completed, 0 failed, 1 left)")));
  const auto all = stores(s.run_dir);
  REQUIRE(all.size() == 3);
  for (const auto& [id, st] : all) {
    INFO(id);
    // The stopped one as the coordinator marked it, or as the stopped rank
    // left it when mpirun's signals reached it.
    if (id != stopped_id) CHECK(st.status.state == core::RunState::completed);
  }

  const auto again = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(again.output);
  REQUIRE(again.code == 0);
  const core::StoreSnapshot done = core::ExperimentStore::read(s.run_dir + "/exp/" + stopped_id + "/store.h5");
  CHECK(done.status.state == core::RunState::completed);
  CHECK(done.status.attempts == 2);
  CHECK(read_text(s.run_dir + "/exp/" + stopped_id + "/log.txt").find("resumed from") != std::string::npos);
}

TEST_CASE("the coordinator killed: the resubmission finishes the rest and rewrites no completed store",
          "[orchestrator][mpi]") {
  Sweep s("[grid]\nmodel.d_state = [4, 8, 16, 32]\n", "seeds = [1]\nretries = 0\norder = \"grid\"\n", 12, 4);
  pid_t job = spawn(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path, s.tmp.path("first.log"));
  // Wait until one experiment is completed, then kill rank 0.
  std::map<std::string, FileId> completed;
  for (int i = 0; i < 6000 && completed.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    if (!fs::exists(s.run_dir + "/exp")) continue;
    try {
      for (auto& [id, st] : stores(s.run_dir))
        if (st.status.state == core::RunState::completed) completed[id] = file_id(s.run_dir + "/exp/" + id + "/store.h5");
    } catch (...) {
    }
  }
  REQUIRE(!completed.empty());
  pid_t coordinator = rank_pid(s.grid_path, 0);
  REQUIRE(coordinator > 0);
  ::kill(coordinator, SIGKILL);
  CHECK(wait_exit(job, 300) != 0);
  wait_ranks_gone(s.grid_path);
  // Stores completed before the kill (re-read now: more may have finished).
  for (auto& [id, st] : stores(s.run_dir))
    if (st.status.state == core::RunState::completed) completed[id] = file_id(s.run_dir + "/exp/" + id + "/store.h5");
  REQUIRE(completed.size() < 4);

  auto r = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(r.output.substr(r.output.size() > 6000 ? r.output.size() - 6000 : 0));
  REQUIRE(r.code == 0);
  auto all = stores(s.run_dir);
  REQUIRE(all.size() == 4);
  for (auto& [id, st] : all) CHECK(st.status.state == core::RunState::completed);
  for (auto& [id, f] : completed) {
    INFO(id);
    FileId now = file_id(s.run_dir + "/exp/" + id + "/store.h5");
    CHECK(now.inode == f.inode);
    CHECK(now.mtime.tv_sec == f.mtime.tv_sec);
    CHECK(now.mtime.tv_nsec == f.mtime.tv_nsec);
    CHECK(r.output.find("start " + id) == std::string::npos);
  }
}

TEST_CASE("points that differ only in the beam size train once: the twin waits, then evaluates the checkpoints",
          "[orchestrator][mpi]") {
  Sweep s("[grid]\neval.beam_size = [1, 2]\nmodel.d_state = [4, 8]\n", "seeds = [1]\nretries = 0\n", 6, 3);
  // 3 workers for 4 points of 2 trainings: one worker waits.
  auto r = run_shell(mpirun(3) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(r.output.substr(r.output.size() > 8000 ? r.output.size() - 8000 : 0));
  REQUIRE(r.code == 0);
  auto all = stores(s.run_dir);
  REQUIRE(all.size() == 4);
  std::map<std::string, std::vector<std::string>> by_training;  // training id -> experiment ids
  for (auto& [id, st] : all) {
    CHECK(st.status.state == core::RunState::completed);
    CHECK(st.scalars.count("test/bleu"));
    by_training[core::parse_experiment(st.config, id).training_id()].push_back(id);
  }
  REQUIRE(by_training.size() == 2);
  for (auto& [training, ids] : by_training) {
    REQUIRE(ids.size() == 2);
    const core::StoreSnapshot &x = all.at(ids[0]), &y = all.at(ids[1]);
    // One trained, the other took its checkpoints over.
    const bool x_shared = x.texts.count("training") > 0, y_shared = y.texts.count("training") > 0;
    REQUIRE(x_shared != y_shared);
    const std::string trained = x_shared ? ids[1] : ids[0], sharing = x_shared ? ids[0] : ids[1];
    CHECK_THAT(all.at(sharing).texts.at("training"), Catch::StartsWith("shared with experiment " + trained));
    CHECK(all.at(sharing).metrics.at("train_loss").size() == all.at(trained).metrics.at("train_loss").size());
    core::CheckpointDir a(s.run_dir + "/exp/" + trained + "/ckpt"), b(s.run_dir + "/exp/" + sharing + "/ckpt");
    REQUIRE(!a.steps().empty());
    CHECK(b.steps() == a.steps());
    CHECK(file_id(b.path_for_step(6)).inode == file_id(a.path_for_step(6)).inode);
    CHECK(r.output.find(sharing + " shares the training of " + s.run_dir + "/exp/" + trained) != std::string::npos);
  }
  // Started 4 times in all, trained twice.
  std::regex start_re("start ([0-9a-f]{12}) ");
  CHECK(std::distance(std::sregex_iterator(r.output.begin(), r.output.end(), start_re), std::sregex_iterator()) == 4);
  CHECK(r.output.find(": it shares the training of ") != std::string::npos);  // a worker waited
}

TEST_CASE("an invalid point fails alone and the rest completes", "[orchestrator][mpi]") {
  Sweep s("[grid]\nmodel.cross_attn_every = [1, 3]\nmodel.d_state = [4, 8]\n",
                       "seeds = [1]\nretries = 1\n", 2, 100);
  // tiny has 2 decoder layers: cross_attn_every = 3 is invalid.
  auto r = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(r.output.substr(r.output.size() > 6000 ? r.output.size() - 6000 : 0));
  CHECK(r.code == 1);
  int completed = 0, failed = 0;
  for (auto& [id, st] : stores(s.run_dir)) {
    if (st.status.state == core::RunState::completed) ++completed;
    if (st.status.state == core::RunState::failed) {
      ++failed;
      CHECK(id[0] == 'x');
      CHECK(st.status.last_error.find("model.cross_attn_every = 3 exceeds model.dec_layers = 2") != std::string::npos);
      CHECK(st.status.last_error.find(s.grid_path + ":") == 0);
    }
  }
  CHECK(completed == 2);
  CHECK(failed == 2);
  auto st = run_shell(mambamt_binary() + " status " + s.run_dir);
  CHECK(st.output.find("2 completed 2 failed") != std::string::npos);
}

TEST_CASE("a rank group of 2 trains one experiment data-parallel like 1 rank with the same global batch",
          "[orchestrator][mpi]") {
  // 2 ranks x 1 batch per update (one group) against 1 rank x 2 accumulated
  // batches. Without dropout (the ranks draw different masks), and with a token
  // budget whose epoch plan is the same for 1 and 2 ranks (an even batch count).
  auto base_with_budget = [](int64_t budget) {
    std::string text = tiny_base(6, 6);
    const std::string from = "data.max_tokens = 256\n";
    text.replace(text.find(from), from.size(), "data.max_tokens = " + std::to_string(budget) + "\n");
    return text + "model.dropout = 0.0\n";
  };
  TempDir scratch;
  int64_t budget = 0;
  for (int64_t t = 256; t <= 512 && budget == 0; t += 8) {
    core::ExperimentConfig c = core::parse_experiment(base_with_budget(t), "budget.toml");
    train::PreparedData p = train::prepare_data(c, scratch.path("shared"), false);
    data::CatNOptions cat{c.data.cat_n, c.data.cat_prob, c.data.max_example_tokens};
    data::BatchingOptions b;
    b.max_tokens = c.data.max_tokens;
    b.oversize = data::Oversize::kSkip;
    const int32_t sep = p.tokenizer->specials().sep;
    bool same = true;
    for (int64_t e = 0; e < 2 && same; ++e)
      same = data::plan_epoch(p.train_examples, cat, b, sep, static_cast<uint64_t>(c.train.seed), e, 1).batches ==
             data::plan_epoch(p.train_examples, cat, b, sep, static_cast<uint64_t>(c.train.seed), e, 2).batches;
    if (same) budget = t;
  }
  REQUIRE(budget > 0);
  auto write_grid = [&](const Sweep& s, const std::string& sweep_extra, const std::string& base_extra) {
    write_text(s.grid_path, "[sweep]\nname = \"t\"\noutput_dir = \"" + s.tmp.path("runs") +
                                "\"\nheartbeat_seconds = 1.0\nseeds = [1]\n" + sweep_extra + "\n[base]\n" +
                                base_with_budget(budget) + base_extra);
  };
  Sweep two("", "", 6, 6), one("", "", 6, 6);
  write_grid(two, "ranks_per_experiment = 2\n", "");
  write_grid(one, "", "train.accum_steps = 2\n");
  auto r2 = run_shell(mpirun(2) + mambamt_binary() + " sweep " + two.grid_path);
  INFO(r2.output.substr(r2.output.size() > 4000 ? r2.output.size() - 4000 : 0));
  REQUIRE(r2.code == 0);
  auto r1 = run_shell(mpirun(1) + mambamt_binary() + " sweep " + one.grid_path);
  INFO(r1.output.substr(r1.output.size() > 4000 ? r1.output.size() - 4000 : 0));
  REQUIRE(r1.code == 0);
  auto s2 = stores(two.run_dir), s1 = stores(one.run_dir);
  REQUIRE(s2.size() == 1);
  REQUIRE(s1.size() == 1);
  auto c2 = core::read_checkpoint(two.run_dir + "/exp/" + s2.begin()->first + "/ckpt/step_00000006.h5");
  auto c1 = core::read_checkpoint(one.run_dir + "/exp/" + s1.begin()->first + "/ckpt/step_00000006.h5");
  int compared = 0;
  for (auto& [name, t] : c1.tensors) {
    if (name.rfind("model/", 0) != 0) continue;
    INFO(name);
    REQUIRE(c2.tensors.count(name));
    CHECK(torch::allclose(t, c2.tensors.at(name), 1e-4, 1e-5));
    ++compared;
  }
  CHECK(compared > 10);
  // The two runs trained on the same tokens per update.
  auto& l1 = s1.begin()->second.metrics.at("train_loss");
  auto& l2 = s2.begin()->second.metrics.at("train_loss");
  REQUIRE(l1.size() == l2.size());
  for (size_t i = 0; i < l1.size(); ++i) CHECK(l1[i].value == Approx(l2[i].value).epsilon(1e-4));
}

TEST_CASE("a sweep with --reevaluate evaluates completed experiments of an older evaluation again, nothing else",
          "[orchestrator][mpi]") {
  Sweep s("[grid]\nmodel.d_state = [4, 8, 16]\n", "seeds = [1]\nretries = 0\n", 6, 3);
  auto first = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(first.output.substr(first.output.size() > 4000 ? first.output.size() - 4000 : 0));
  REQUIRE(first.code == 0);
  auto before = stores(s.run_dir);
  REQUIRE(before.size() == 3);
  for (auto& [id, st] : before) CHECK(st.scalars.at("evaluation/version") == core::kEvaluationVersion);
  // Two stores as an older mambamt left them: an older evaluation version, and
  // a BLEU that is not what this evaluation computes.
  std::vector<std::string> old_ids;
  for (auto& [id, st] : before)
    if (old_ids.size() < 2) old_ids.push_back(id);
  std::string current;
  for (auto& [id, st] : before)
    if (id != old_ids[0] && id != old_ids[1]) current = id;
  // The second as version 3 left it: the alignment and the test sets changed since.
  make_evaluated_by_older(s.run_dir + "/exp/" + old_ids[0] + "/store.h5");
  make_evaluated_by_older(s.run_dir + "/exp/" + old_ids[1] + "/store.h5", 3);
  const FileId untouched = file_id(s.run_dir + "/exp/" + current + "/store.h5");

  auto dry = run_shell(mambamt_binary() + " sweep " + s.grid_path + " --dry-run");
  CHECK_THAT(dry.output, Catch::Contains("0 of 3 points to run") &&
                             Catch::Contains("2 completed point(s) evaluated by an older mambamt: `--reevaluate` "
                                             "evaluates them again"));
  // What --reevaluate runs of each: version 0, before the versions that name
  // their parts, gets the whole suite.
  const std::string version_now = std::to_string(core::kEvaluationVersion);
  CHECK_THAT(dry.output, Catch::Contains("evaluated by an older mambamt (evaluation version 0, now " + version_now +
                                         "): --reevaluate evaluates it again (alignment, contrastive, efficiency, "
                                         "entities, explain, extrapolation, gates, test_sets)"));
  CHECK_THAT(dry.output, Catch::Contains("evaluated by an older mambamt (evaluation version 3, now " + version_now +
                                         "): --reevaluate evaluates it again (alignment, test_sets)"));
  CHECK_THAT(run_shell(mambamt_binary() + " status " + s.run_dir).output,
             Catch::Contains("2 completed experiment(s) evaluated by an older mambamt"));
  auto collected = run_shell(mambamt_binary() + " collect " + s.run_dir + " --out " + s.tmp.path("results"));
  CHECK_THAT(collected.output, Catch::Contains("2 completed store(s) evaluated by an older mambamt"));
  // Without --reevaluate nothing runs.
  auto plain = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  CHECK(plain.code == 0);
  CHECK(plain.output.find(" start ") == std::string::npos);
  CHECK(plain.output.find(" evaluate again ") == std::string::npos);
  for (const std::string& id : old_ids)
    CHECK(core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5").scalars.at("test/bleu") == -1);

  auto again = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path + " --reevaluate");
  INFO(again.output.substr(again.output.size() > 6000 ? again.output.size() - 6000 : 0));
  REQUIRE(again.code == 0);
  auto after = stores(s.run_dir);
  for (const std::string& id : old_ids) {
    INFO(id);
    CHECK(again.output.find("evaluate again " + id) != std::string::npos);
    CHECK(again.output.find("evaluated " + id) != std::string::npos);
    const core::StoreSnapshot &was = before.at(id), &now = after.at(id);
    // The same checkpoints evaluated the same way give the first evaluation's BLEU.
    CHECK(now.scalars.at("test/bleu") == was.scalars.at("test/bleu"));
    if (id == old_ids[0]) {
      // The whole suite: the decoding speed measured again.
      CHECK(now.scalars.at("efficiency/decode_tokens_per_s") > 0);
    } else {
      // Only the alignment and the test sets: the speed was not measured again.
      CHECK(now.scalars.at("efficiency/decode_tokens_per_s") == -1);
      CHECK(now.scalars.at("alignment/aer") == was.scalars.at("alignment/aer"));
    }
    CHECK(now.scalars.at("evaluation/version") == core::kEvaluationVersion);
    // Its training and status are as they were.
    CHECK(now.status.state == core::RunState::completed);
    CHECK(now.status.attempts == was.status.attempts);
    CHECK(now.status.step == was.status.step);
    CHECK(now.status.finished == was.status.finished);
    CHECK(now.metrics.at("train_loss").size() == was.metrics.at("train_loss").size());
  }
  CHECK(again.output.find(" start ") == std::string::npos);
  CHECK(again.output.find(current) == std::string::npos);
  const FileId still = file_id(s.run_dir + "/exp/" + current + "/store.h5");
  CHECK(still.inode == untouched.inode);
  CHECK(still.mtime.tv_nsec == untouched.mtime.tv_nsec);
  // Nothing is left to evaluate again.
  auto done = run_shell(mambamt_binary() + " sweep " + s.grid_path + " --dry-run --reevaluate");
  CHECK(done.output.find("evaluated by an older mambamt") == std::string::npos);
  CHECK(run_shell(mambamt_binary() + " status " + s.run_dir).output.find("older mambamt") == std::string::npos);
}

TEST_CASE("a point whose twin another job is training is left to that job, which shares the training with it",
          "[orchestrator][mpi]") {
  Sweep s("[grid]\neval.beam_size = [1, 2]\n", "seeds = [1]\nretries = 0\n", 300, 10);
  // Job A trains one of the two (the other waits in A too); job B starts while it does.
  pid_t a = spawn(mpirun(1) + mambamt_binary() + " sweep " + s.grid_path, s.tmp.path("a.log"));
  const std::string training = wait_for_checkpoint(s.run_dir, 120, 60);
  REQUIRE(!training.empty());
  auto b = run_shell(mpirun(1) + mambamt_binary() + " sweep " + s.grid_path);
  const int a_code = wait_exit(a, 300);
  const std::string a_log = read_text(s.tmp.path("a.log"));
  INFO("job A:\n" << a_log.substr(a_log.size() > 4000 ? a_log.size() - 4000 : 0));
  INFO("job B:\n" << b.output.substr(b.output.size() > 4000 ? b.output.size() - 4000 : 0));
  CHECK(a_code == 0);
  CHECK_THAT(b.output, Catch::Contains("shares the training of " + training) &&
                           Catch::Contains("running in another job"));
  // One training: the other point evaluated the trained checkpoints, in job A:
  // B, with nothing else to do, left it to A instead of idling until then.
  auto all = stores(s.run_dir);
  REQUIRE(all.size() == 2);
  for (auto& [id, st] : all) {
    INFO(id);
    CHECK(st.status.state == core::RunState::completed);
    if (id == training) {
      CHECK(st.texts.count("training") == 0);
    } else {
      CHECK_THAT(st.texts.at("training"), Catch::StartsWith("shared with experiment " + training));
      CHECK_THAT(b.output, Catch::Contains("leave " + id) && Catch::Contains("to the job training " + training));
      CHECK(b.output.find("start " + id) == std::string::npos);
      CHECK_THAT(a_log, Catch::Contains("start " + id));
    }
  }
}

TEST_CASE("SIGTERM during the evaluation of a sweep: it stops within the part, the store is interrupted with its "
          "training, and the resubmission evaluates it",
          "[orchestrator][mpi]") {
  // A test set whose decoding takes seconds (a wider model, 80 documents, a
  // beam of 4), SIGTERM to the rank at a random moment of the first second of
  // the evaluation, as Slurm's step daemon delivers scancel's to every task
  // (mpirun itself, given SIGTERM, kills its ranks a second after passing it on).
  Sweep s("[grid]\nmodel.d_model = [192]\ndata.synthetic.test_docs = [80]\neval.max_examples = [0]\n"
          "eval.beam_size = [4]\n",
          "seeds = [1]\nretries = 0\n", 4, 2);
  const pid_t job = spawn("exec env " + mpirun(1) + mambamt_binary() + " sweep " + s.grid_path, s.tmp.path("first.log"));
  REQUIRE(wait_for_log(s.tmp.path("first.log"), "] evaluating ", 120));
  std::mt19937 rng(std::random_device{}());
  const int delay_ms = std::uniform_int_distribution<int>(100, 1000)(rng);
  INFO("SIGTERM " << delay_ms << " ms into the evaluation");
  std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  const pid_t rank0 = rank_pid(s.grid_path, 0);
  REQUIRE(rank0 > 0);
  ::kill(rank0, SIGTERM);
  const int code = wait_exit(job, 120);
  wait_ranks_gone(s.grid_path);
  const std::string log = read_text(s.tmp.path("first.log"));
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(code == 3);
  // Between two batches of the test set's decoding, not at the end of it.
  CHECK_THAT(log, Catch::Contains("evaluation stopped within a part (stop request)"));
  const auto first = stores(s.run_dir);
  REQUIRE(first.size() == 1);
  const std::string id = first.begin()->first;
  const core::StoreSnapshot& st = first.begin()->second;
  CHECK(st.status.state == core::RunState::interrupted);
  CHECK(st.status.step == 4);
  CHECK(st.scalars.count("evaluation/version") == 0);

  const auto again = run_shell(mpirun(1) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(again.output.substr(again.output.size() > 3000 ? again.output.size() - 3000 : 0));
  REQUIRE(again.code == 0);
  const core::StoreSnapshot done = core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5");
  CHECK(done.status.state == core::RunState::completed);
  CHECK(done.status.attempts == 2);
  CHECK(done.scalars.at("evaluation/version") == core::kEvaluationVersion);
  CHECK(done.scalars.count("test/bleu") == 1);
  // The training was not done again: every logged step once.
  std::map<int64_t, int> seen;
  for (const auto& p : done.metrics.at("train_loss")) seen[p.step]++;
  for (const auto& [step, n] : seen) CHECK(n == 1);
}

TEST_CASE("the checkpoint signal during --reevaluate: the evaluation stops between parts, the store keeps its "
          "older results, and the next --reevaluate does it",
          "[orchestrator][mpi]") {
  // One point whose evaluation takes long enough to be signalled in: a wider
  // model decoding 80 test documents with a beam of 4 (several seconds; the
  // signal comes a second after the evaluation has started).
  Sweep s("[grid]\nmodel.d_model = [192]\ndata.synthetic.test_docs = [80]\neval.max_examples = [0]\n"
          "eval.beam_size = [4]\n",
          "seeds = [1]\nretries = 0\ncheckpoint_signal = \"USR2\"\n", 4, 2);
  auto first = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path);
  INFO(first.output.substr(first.output.size() > 3000 ? first.output.size() - 3000 : 0));
  REQUIRE(first.code == 0);
  auto before = stores(s.run_dir);
  REQUIRE(before.size() == 1);
  const std::string id = before.begin()->first;
  const double bleu = before.begin()->second.scalars.at("test/bleu");
  make_evaluated_by_older(s.run_dir + "/exp/" + id + "/store.h5");
  // exec: the signal goes to mpirun itself, not to a shell around it.
  const pid_t job = spawn("exec env " + mpirun(2) + mambamt_binary() + " sweep " + s.grid_path + " --reevaluate",
                          s.tmp.path("again.log"));
  // Signalled once the evaluation is under way (mpirun passes USR2 on to the ranks).
  REQUIRE(wait_for_log(s.tmp.path("again.log"), "/exp/" + id + " with parameters from", 120));
  std::this_thread::sleep_for(std::chrono::seconds(1));
  ::kill(job, SIGUSR2);
  const int code = wait_exit(job, 300);
  wait_ranks_gone(s.grid_path);
  const std::string log = read_text(s.tmp.path("again.log"));
  INFO(log.substr(log.size() > 4000 ? log.size() - 4000 : 0));
  CHECK(code == 3);
  CHECK_THAT(log, Catch::Contains("evaluation of " + id) && Catch::Contains("stopped") &&
                      Catch::Contains("--reevaluate starts it again"));
  // Still completed, its training as it was, and still of the older evaluation.
  core::StoreSnapshot mid = core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5");
  CHECK(mid.status.state == core::RunState::completed);
  CHECK(mid.status.step == before.at(id).status.step);
  CHECK(mid.scalars.at("evaluation/version") == 0);
  CHECK_THAT(run_shell(mambamt_binary() + " sweep " + s.grid_path + " --dry-run").output,
             Catch::Contains("1 completed point(s) evaluated by an older mambamt"));

  auto again = run_shell(mpirun(2) + mambamt_binary() + " sweep " + s.grid_path + " --reevaluate");
  INFO(again.output.substr(again.output.size() > 3000 ? again.output.size() - 3000 : 0));
  REQUIRE(again.code == 0);
  core::StoreSnapshot after = core::ExperimentStore::read(s.run_dir + "/exp/" + id + "/store.h5");
  CHECK(after.status.state == core::RunState::completed);
  CHECK(after.scalars.at("evaluation/version") == core::kEvaluationVersion);
  CHECK(after.scalars.at("test/bleu") == bleu);
}
