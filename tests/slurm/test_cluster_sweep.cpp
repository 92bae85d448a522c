// The real sweep on the test cluster (tests/slurm/cluster_fixture.h): the
// built mambamt binary trains tiny grids under jobs/ablation_grid.slurm with
// srun --mpi=pmix on 2 ranks, to the end with the collector chained after it,
// through a time limit shorter than the sweep (signal, checkpoint, requeue),
// through scancel and a resubmission, and through scontrol requeue.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "cluster_fixture.h"
#include "core/checkpoint.h"
#include "core/store.h"
#include "slurm/requeue.h"
#include "test_util.h"
#include "tiny_grid.h"

using slurm_test::Cluster;
using slurm_test::shell_quote;
using namespace mambamt;
namespace fs = std::filesystem;

namespace {

std::string job_script(const std::string& name) { return source_dir() + "/jobs/" + name; }

// A grid in a fresh directory, which is also the jobs' working directory: the
// run directory is runs/t (relative, as a grid in a repository would have it).
struct TinySweep {
  TempDir tmp;
  std::string run_dir;
  TinySweep(const std::string& grid_section, const std::string& sweep_extra, int max_steps, int checkpoint_every,
            int log_every) {
    run_dir = tmp.path("runs/t");
    write_text(tmp.path("grid.toml"), "[sweep]\nname = \"t\"\noutput_dir = \"runs\"\nheartbeat_seconds = 1.0\n"
                                      "seeds = [1]\nretries = 0\n" + sweep_extra + "\n[base]\n" +
                                          tiny_base(max_steps, checkpoint_every, log_every, 100000) + "\n" + grid_section);
  }
  std::string store(const std::string& id) const { return run_dir + "/exp/" + id + "/store.h5"; }
};

// sbatch jobs/ablation_grid.slurm grid.toml on 2 ranks of the node's 2 CPUs, the real binary.
std::string submit_sweep(const Cluster& c, const TinySweep& s, const std::string& out, const std::string& sbatch_extra,
                         const std::string& env_extra = "") {
  return c.submit("--ntasks-per-node=2 --cpus-per-task=1 --chdir=" + s.tmp.dir() + " --output=" + out + " " +
                      sbatch_extra + " " + job_script("ablation_grid.slurm") + " grid.toml",
                  "MAMBAMT_BIN=" + shell_quote(mambamt_binary()) + " " + env_extra);
}

// Cancels the jobs a test submitted (and only those) and waits until they are
// gone from the node, so the next test starts on an empty node.
struct CancelJobs {
  std::vector<std::string> jobs;
  std::string add(const std::string& job) {
    jobs.push_back(job);
    return job;
  }
  ~CancelJobs() {
    const Cluster& c = Cluster::get();
    for (const auto& j : jobs) c.run("scancel " + j + " 2>/dev/null");
    for (const auto& j : jobs)
      c.wait_for(j, {"", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}, 30);
  }
};

std::map<std::string, core::StoreSnapshot> stores(const std::string& run_dir) {
  std::map<std::string, core::StoreSnapshot> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(run_dir + "/exp", ec); !ec && it != fs::directory_iterator();
       it.increment(ec)) {
    const std::string p = it->path().string() + "/store.h5";
    if (fs::exists(p)) out[it->path().filename().string()] = core::ExperimentStore::read(p);
  }
  return out;
}

// The stores as they are now; none while one of them is being committed (unreadable).
std::map<std::string, core::StoreSnapshot> stores_now(const std::string& run_dir) {
  try {
    return stores(run_dir);
  } catch (const std::exception&) {
    return {};
  }
}

struct FileId {
  ino_t inode = 0;
  timespec mtime{};
};

FileId file_id(const std::string& path) {
  struct stat st {};
  ::stat(path.c_str(), &st);
  return {st.st_ino, st.st_mtim};
}

// The coordinator's log in a job's output file, all runs of the job (the
// script appends): per experiment how often it was started, completed and
// interrupted, and every start of an experiment that was already running in
// the same run (a second concurrent copy). A new run (the script's header line)
// ends the runs before it: their processes are gone.
struct SweepEvents {
  int runs = 0;
  std::map<std::string, int> starts, completed, interrupted, failed;
  std::map<std::string, std::vector<int>> start_runs;  // the runs that started it
  std::vector<std::string> concurrent;                 // "id in run r"
};

SweepEvents sweep_events(const std::string& out) {
  SweepEvents e;
  const std::regex header(R"(mambamt sweep: job \d+ restart \d+)");
  const std::regex event(R"(\[\d+/\d+\] (start|completed|interrupted|failed|lost) ([0-9a-z]+)\b)");
  std::set<std::string> running;
  std::istringstream lines(out);
  std::string line;
  std::smatch m;
  while (std::getline(lines, line)) {
    if (std::regex_search(line, header)) {
      ++e.runs;
      running.clear();
      continue;
    }
    if (!std::regex_search(line, m, event)) continue;
    const std::string what = m[1].str(), id = m[2].str();
    if (what == "start") {
      if (running.count(id)) e.concurrent.push_back(id + " in run " + std::to_string(e.runs));
      running.insert(id);
      ++e.starts[id];
      e.start_runs[id].push_back(e.runs);
      continue;
    }
    running.erase(id);
    if (what == "completed") ++e.completed[id];
    if (what == "interrupted") ++e.interrupted[id];
    if (what == "failed") ++e.failed[id];
  }
  return e;
}

// The end of a long output, for INFO.
std::string tail(const std::string& s, size_t n = 6000) { return s.size() > n ? s.substr(s.size() - n) : s; }

int restarts_of(const Cluster& c, const std::string& job) {
  std::smatch m;
  const std::string info = c.run("scontrol show job -o " + job).output;
  return std::regex_search(info, m, std::regex(R"(Restarts=(\d+))")) ? std::stoi(m[1].str()) : -1;
}

// An experiment that ran more than once continued from its checkpoint: its log
// says so, and its training loss has every logged step once (no step trained
// twice), up to the last.
void check_resumed(const TinySweep& s, const std::string& id, int max_steps) {
  INFO("experiment " << id);
  const std::string log = read_text(s.run_dir + "/exp/" + id + "/log.txt");
  INFO(tail(log, 3000));
  CHECK(log.find("resumed from") != std::string::npos);
  const core::StoreSnapshot st = core::ExperimentStore::read(s.store(id));
  REQUIRE(st.metrics.count("train_loss"));
  std::map<int64_t, int> seen;
  for (const auto& p : st.metrics.at("train_loss")) seen[p.step]++;
  for (const auto& [step, n] : seen) {
    INFO("step " << step);
    CHECK(n == 1);
  }
  REQUIRE(!seen.empty());
  CHECK(seen.rbegin()->first == max_steps);
}

}  // namespace

TEST_CASE("the real sweep under sbatch runs a tiny grid to the end and the chained collector writes its report",
          "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelJobs cancel;
  TinySweep s("[grid]\nmodel.d_state = [4, 8]\n", "", 4, 100, 1);
  // submit_sweep.sh from the grid's directory: RUN_DIR runs/t from the [sweep] table.
  const auto r = c.run("cd " + s.tmp.dir() + " && MAMBAMT_BIN=" + shell_quote(mambamt_binary()) + " " + source_dir() +
                       "/jobs/submit_sweep.sh grid.toml -- --ntasks-per-node=2 --cpus-per-task=1 --output=" +
                       s.tmp.path("sweep.out"));
  INFO(r.output);
  REQUIRE(r.code == 0);
  // The grid's data was prepared here before the submission.
  CHECK(r.output.find("1 of 1 data setups prepared") != std::string::npos);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex(R"(sweep (\d+)\ncollect (\d+)\n)")));
  const std::string sweep = cancel.add(m[1].str()), collect = cancel.add(m[2].str());
  CHECK(c.wait_done(sweep, 300) == "COMPLETED");
  CHECK(c.wait_done(collect, 120) == "COMPLETED");
  const std::string out = read_text(s.tmp.path("sweep.out"));
  INFO(tail(out));
  CHECK(out.find("sweep step ended with exit code 0") != std::string::npos);
  CHECK(std::regex_search(out, std::regex(R"(sweep \S*runs/t: 2 of 2 completed, 0 failed, 0 left)")));

  const auto all = stores(s.run_dir);
  REQUIRE(all.size() == 2);
  for (const auto& [id, st] : all) {
    INFO(id);
    CHECK(st.status.state == core::RunState::completed);
    CHECK(st.status.step == 4);
    CHECK(st.status.attempts == 1);
    CHECK(st.status.job_id == sweep);
  }
  // Both ranks trained, one experiment each started once.
  SweepEvents e = sweep_events(out);
  CHECK(e.runs == 1);
  CHECK(e.starts.size() == 2);
  for (const auto& [id, n] : e.starts) CHECK(n == 1);
  CHECK(out.find("on rank 0") != std::string::npos);
  CHECK(out.find("on rank 1") != std::string::npos);

  // The collector ran after the sweep in the same directory: results/t beside runs/.
  const std::string collect_out = read_text(s.tmp.path("mambamt-collect-" + collect + ".out"));
  INFO(collect_out);
  CHECK(collect_out.find("completed 2 · running 0 · pending 0 · interrupted 0 · failed 0") != std::string::npos);
  CHECK(collect_out.find("report: results/t/report.md (") != std::string::npos);
  CHECK(collect_out.find("partial") == std::string::npos);
  REQUIRE(fs::exists(s.tmp.path("results/t/report.md")));
  CHECK(fs::exists(s.tmp.path("results/t/summary.h5")));
  const std::string report = read_text(s.tmp.path("results/t/report.md"));
  CHECK(report.rfind("# Sweep `t`", 0) == 0);
  CHECK(report.find("sweep completed") != std::string::npos);
  CHECK(report.find("### Ablation: model.d_state") != std::string::npos);
  // afterany: the collector started once the sweep had ended.
  const auto sweep_info = slurm::parse_scontrol_show_job(c.run("scontrol show job -o " + sweep).output);
  const auto collect_info = slurm::parse_scontrol_show_job(c.run("scontrol show job -o " + collect).output);
  REQUIRE(sweep_info.end_time);
  REQUIRE(collect_info.start_time);
  CHECK(*collect_info.start_time >= *sweep_info.end_time);
}

namespace {

// Training steps per second of the tiny experiment on this machine now, with
// the same 2 ranks on the node's 2 CPUs as the sweep jobs (srun, one
// experiment per rank): the faster rank, timed between its logged steps once
// both have logged 100 steps (then the step is cancelled: no evaluation).
double tiny_steps_per_second(const Cluster& c) {
  TinySweep s("[grid]\nmodel.d_state = [4, 8]\n", "", 100000, 100000, 10);
  const std::string name = "mambamt-calibrate-" + std::to_string(::getpid());
  const auto r = c.run("cd " + s.tmp.dir() + " && (OMP_NUM_THREADS=1 setsid srun --job-name=" + name +
                       " --mpi=pmix -n 2 --cpus-per-task=1 " + shell_quote(mambamt_binary()) +
                       " sweep grid.toml > calibrate.out 2>&1 &)");
  REQUIRE(r.code == 0);
  double fastest = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(300);
  while (fastest == 0 && std::chrono::steady_clock::now() < end) {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    const auto all = stores_now(s.run_dir);
    if (all.size() < 2) continue;
    double rate = 0;
    for (const auto& [id, st] : all) {
      const auto it = st.metrics.find("train_loss");
      if (it == st.metrics.end() || it->second.size() < 2 || it->second.back().step < 100) {
        rate = 0;
        break;
      }
      const auto& loss = it->second;
      const double seconds = loss.back().time - loss.front().time;
      if (seconds > 0) rate = std::max(rate, static_cast<double>(loss.back().step - loss.front().step) / seconds);
    }
    fastest = rate;
  }
  c.run("scancel --name=" + name);
  for (int i = 0; i < 60 && !c.run("squeue -h --name=" + name).output.empty(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  INFO(read_text(s.tmp.path("calibrate.out")));
  REQUIRE(fastest > 0);
  return fastest;
}

}  // namespace

// A grid whose variant names a test set that is not there: submit_sweep.sh's
// `mambamt prepare` reports it and nothing reaches the queue.
TEST_CASE("submit_sweep.sh submits nothing when the grid's data does not prepare", "[slurm]") {
  const Cluster& c = Cluster::get();
  TinySweep s("[[variant]]\nname = \"bad test set\"\ndata.test = [\"missing.tsv\"]\n", "", 4, 100, 1);
  const auto r = c.run("cd " + s.tmp.dir() + " && MAMBAMT_BIN=" + shell_quote(mambamt_binary()) + " " + source_dir() +
                       "/jobs/submit_sweep.sh grid.toml");
  INFO(r.output);
  CHECK(r.code == 1);
  CHECK(r.output.find("missing.tsv") != std::string::npos);
  CHECK(r.output.find("1 of 2 data setups prepared") != std::string::npos);
  CHECK(r.output.find("nothing submitted") != std::string::npos);
  CHECK(r.output.find("\nsweep ") == std::string::npos);
  // No job runs or waits in this directory.
  const auto q = c.run("squeue -h -o %Z");
  CHECK(q.output.find(s.tmp.dir()) == std::string::npos);
}

TEST_CASE("the real sweep under a time limit shorter than the sweep: signal, checkpoint, requeue, every experiment "
          "completed once",
          "[slurm]") {
  // Two experiments, one per rank, sized to about 90 s of training at the
  // speed measured just before (machines and their load differ tenfold; a
  // compile beside the calibration once made it 1.9x slow), under
  // --signal=B:USR2@120 and a limit far away. Once both have a checkpoint the
  // test cuts the job's limit (Cluster::cut_time_limit): Slurm's next
  // time-limit check, at most 30 s later, sends the signal, both ranks
  // checkpoint, rank 0 sees the time limit and requeues, and the test gives
  // the limit back before the job comes back (restart 1) to resume both from
  // their checkpoints and finish.
  constexpr int kLead = 120;
  constexpr double kSweepSeconds = 90;
  const Cluster& c = Cluster::get();
  CancelJobs cancel;
  const double rate = tiny_steps_per_second(c);
  const int steps = std::max(200, static_cast<int>(rate * kSweepSeconds / 100) * 100);
  INFO(rate << " steps/s: " << steps << " steps per experiment");
  TinySweep s("[grid]\nmodel.d_state = [4, 8]\n", "max_requeues = 8\n", steps, 100, 50);
  const std::string job = cancel.add(submit_sweep(
      c, s, s.tmp.path("out"), "--time=30 --signal=B:USR2@" + std::to_string(kLead),
      "MAMBAMT_SIGNAL_LEAD=" + std::to_string(kLead)));
  // Both training, each with a checkpoint.
  const auto checkpointed = [&] {
    const auto all = stores_now(s.run_dir);
    if (all.size() < 2) return false;
    for (const auto& [id, st] : all)
      if (core::CheckpointDir(s.run_dir + "/exp/" + id + "/ckpt").steps().empty()) return false;
    return true;
  };
  const auto wait_until = [](const auto& done, int timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (!done() && std::chrono::steady_clock::now() < end) std::this_thread::sleep_for(std::chrono::milliseconds(200));
    return done();
  };
  if (!wait_until(checkpointed, 300)) FAIL("no checkpoint of both experiments; the job's output:\n" << tail(read_text(s.tmp.path("out"))));
  const int left = c.cut_time_limit(job, kLead);
  INFO(left << " s left at the cut limit");
  const auto decided = [&] { return read_text(s.tmp.path("out")).find("stop: time_limit;") != std::string::npos; };
  if (!wait_until(decided, 90)) FAIL("no time-limit stop; the job's output:\n" << tail(read_text(s.tmp.path("out"))));
  c.set_time_limit(job, 30);
  const std::string state = c.wait_done(job, 600);
  const std::string out = read_text(s.tmp.path("out"));
  INFO(tail(out, 8000));
  CHECK(state == "COMPLETED");

  // The first run: the signal reached the ranks, both checkpointed, rank 0 requeued.
  const size_t first = out.find("mambamt sweep: job " + job + " restart 0 on 1 node");
  REQUIRE(first != std::string::npos);
  const size_t signal = out.find("got SIGUSR2, passing it to the sweep", first);
  REQUIRE(signal != std::string::npos);
  const size_t requeue = out.find("stop: time_limit; time_limit: requeue (restart 0 of at most 8)", signal);
  CHECK(requeue != std::string::npos);
  CHECK(out.find("mambamt sweep: job " + job + " restart 1 ", signal) != std::string::npos);
  const int restarts = restarts_of(c, job);
  CHECK(restarts >= 1);
  CHECK(out.find("sweep step ended with exit code 0") != std::string::npos);

  SweepEvents e = sweep_events(out);
  CHECK(e.runs == restarts + 1);
  for (const auto& x : e.concurrent) FAIL_CHECK("started again while it ran: " << x);
  const auto all = stores(s.run_dir);
  REQUIRE(all.size() == 2);
  int resumed = 0;
  for (const auto& [id, st] : all) {
    INFO(id);
    CHECK(st.status.state == core::RunState::completed);
    CHECK(st.status.step == steps);
    CHECK(e.completed[id] == 1);
    CHECK(e.failed.count(id) == 0);
    // One attempt per start, every start after the first in a later run after an interruption.
    CHECK(st.status.attempts == e.starts[id]);
    CHECK(e.interrupted[id] == st.status.attempts - 1);
    const auto& runs = e.start_runs[id];
    for (size_t i = 1; i < runs.size(); ++i) CHECK(runs[i] > runs[i - 1]);
    if (st.status.attempts > 1) {
      check_resumed(s, id, steps);
      ++resumed;
    }
  }
  // Running when the first signal came (both, unless one had just finished).
  CHECK(resumed >= 1);
  const auto status = run_shell(mambamt_binary() + " status " + s.run_dir);
  CHECK(status.output.find("2 experiments: 2 completed") != std::string::npos);
}

namespace {

// Three experiments on 2 ranks, most expensive first: the long one on one
// rank, the two short ones after each other on the other. The job is stopped
// once both short ones are completed and the long one has a checkpoint; then
// it comes back (a resubmission, or Slurm's own requeue). The rest completes,
// nothing completed is started or rewritten again, and the long one resumes
// from the checkpoint it wrote when it was stopped.
struct StopMidSweep {
  // Long enough that it is still training when the short ones (30 and 40
  // steps, most of their time start-up and evaluation) are done: 700 steps
  // took 7 s on a machine training this model at 37k tokens/s and ended
  // before the stop arrived.
  static constexpr int kLong = 2400;
  TinySweep s{"[grid]\ntrain.max_steps = [30, 40, " + std::to_string(kLong) + "]\n", "order = \"cost\"\n", 10, 20, 10};
  std::map<std::string, FileId> completed;  // before the stop
  std::string long_id;
  int64_t stop_step = -1;

  // Waits for the moment to stop the job: both short ones completed, the long
  // one training with a checkpoint. Records the completed stores.
  bool wait_for_stop_point(int timeout_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    while (std::chrono::steady_clock::now() < end) {
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      completed.clear();
      long_id.clear();
      for (const auto& [id, st] : stores_now(s.run_dir)) {
        if (st.status.total_steps == kLong && st.status.state == core::RunState::running) long_id = id;
        if (st.status.state == core::RunState::completed) completed[id] = file_id(s.store(id));
      }
      if (completed.size() < 2 || long_id.empty()) continue;
      if (!core::CheckpointDir(s.run_dir + "/exp/" + long_id + "/ckpt").steps().empty()) return true;
    }
    return false;
  }

  // The run that was stopped: SIGTERM is a stop request too, so the long one
  // was checkpointed and reported interrupted before Slurm's KILL; rank 0 did
  // not requeue (scancel means stop; a requeue is Slurm's own doing).
  void check_stopped_run(const std::string& out) {
    CHECK(out.find("stop: terminate; SIGTERM (scancel or preemption): not requeued by the sweep") != std::string::npos);
    std::smatch m;
    REQUIRE(std::regex_search(out, m, std::regex("interrupted " + long_id + R"( \([^)]*\) at step (\d+))")));
    stop_step = std::stoll(m[1].str());
    CHECK(stop_step > 0);
    CHECK(stop_step < kLong);
    CHECK(out.find("start " + long_id) != std::string::npos);
  }

  // After the job that finished the sweep; `out`: the output of the run after the stop.
  void check_finished(const std::string& out) {
    CHECK(std::regex_search(out, std::regex(R"(sweep \S*runs/t: 3 of 3 completed, 0 failed, 0 left)")));
    SweepEvents e = sweep_events(out);
    CHECK(e.concurrent.empty());
    CHECK(e.starts.size() == 1);
    CHECK(e.starts[long_id] == 1);
    const auto all = stores(s.run_dir);
    REQUIRE(all.size() == 3);
    for (const auto& [id, st] : all) {
      INFO(id);
      CHECK(st.status.state == core::RunState::completed);
      CHECK(st.status.step == st.status.total_steps);
    }
    for (const auto& [id, f] : completed) {
      INFO("completed before the stop: " << id);
      const FileId now = file_id(s.store(id));
      CHECK(now.inode == f.inode);
      CHECK(now.mtime.tv_sec == f.mtime.tv_sec);
      CHECK(now.mtime.tv_nsec == f.mtime.tv_nsec);
      CHECK(all.at(id).status.attempts == 1);
      CHECK(out.find("start " + id) == std::string::npos);
    }
    CHECK(all.at(long_id).status.attempts == 2);
    check_resumed(s, long_id, kLong);
    // From the checkpoint of the stop, not an older one.
    const std::string log = read_text(s.run_dir + "/exp/" + long_id + "/log.txt");
    CHECK(log.find("stop signal: checkpointed at step " + std::to_string(stop_step)) != std::string::npos);
    CHECK(std::regex_search(log, std::regex("resumed from \\S+ \\(step " + std::to_string(stop_step) + ",")));
  }
};

}  // namespace

TEST_CASE("the real sweep cancelled mid-sweep: the resubmitted job finishes the rest and reruns nothing completed",
          "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelJobs cancel;
  StopMidSweep t;
  const std::string first = cancel.add(submit_sweep(c, t.s, t.s.tmp.path("first.out"), ""));
  REQUIRE(c.wait_for(first, {"RUNNING"}, 120) == "RUNNING");
  const bool at_stop_point = t.wait_for_stop_point(300);
  INFO(tail(read_text(t.s.tmp.path("first.out"))));
  REQUIRE(at_stop_point);
  REQUIRE(c.run("scancel " + first).code == 0);
  CHECK(c.wait_done(first, 60) == "CANCELLED");
  CHECK(restarts_of(c, first) == 0);
  const std::string first_out = read_text(t.s.tmp.path("first.out"));
  INFO(tail(first_out));
  t.check_stopped_run(first_out);
  // What the resubmission finds: the long one interrupted at its last checkpoint.
  const core::StoreSnapshot st = core::ExperimentStore::read(t.s.store(t.long_id));
  CHECK(st.status.state == core::RunState::interrupted);
  CHECK(st.status.step == t.stop_step);
  CHECK(core::CheckpointDir(t.s.run_dir + "/exp/" + t.long_id + "/ckpt").latest_step() == t.stop_step);

  const std::string second = cancel.add(submit_sweep(c, t.s, t.s.tmp.path("second.out"), ""));
  CHECK(c.wait_done(second, 300) == "COMPLETED");
  const std::string second_out = read_text(t.s.tmp.path("second.out"));
  INFO(tail(second_out));
  t.check_finished(second_out);
  CHECK(core::ExperimentStore::read(t.s.store(t.long_id)).status.job_id == second);
}

TEST_CASE("the real sweep requeued mid-sweep with scontrol requeue: the same job finishes the rest exactly once",
          "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelJobs cancel;
  StopMidSweep t;
  const std::string job = cancel.add(submit_sweep(c, t.s, t.s.tmp.path("out"), ""));
  REQUIRE(c.wait_for(job, {"RUNNING"}, 120) == "RUNNING");
  const bool at_stop_point = t.wait_for_stop_point(300);
  INFO(tail(read_text(t.s.tmp.path("out"))));
  REQUIRE(at_stop_point);
  const auto rq = c.run("scontrol requeue " + job);
  INFO(rq.output);
  REQUIRE(rq.code == 0);
  CHECK(c.wait_done(job, 300) == "COMPLETED");
  CHECK(restarts_of(c, job) == 1);
  const std::string out = read_text(t.s.tmp.path("out"));
  INFO(tail(out, 8000));
  const size_t second_run = out.find("mambamt sweep: job " + job + " restart 1 ");
  REQUIRE(second_run != std::string::npos);
  t.check_stopped_run(out.substr(0, second_run));
  t.check_finished(out.substr(second_run));
  // Every experiment completed once over both runs, none started while it ran.
  SweepEvents e = sweep_events(out);
  CHECK(e.runs == 2);
  CHECK(e.concurrent.empty());
  CHECK(e.completed.size() == 3);
  for (const auto& [id, n] : e.completed) {
    INFO(id);
    CHECK(n == 1);
  }
}
