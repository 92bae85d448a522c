// Programs that the [slurm] tests run inside jobs, as test cases of this binary
// (`test_slurm "probe: job environment"`): they report what the library sees
// from inside a real Slurm job. Run anywhere else (no MAMBAMT_PROBE_OUT) they
// do nothing and pass.
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>

#include "core/signals.h"
#include "slurm/env.h"
#include "slurm/requeue.h"

using namespace mambamt;

namespace {

std::string probe_out() {
  const char* d = std::getenv("MAMBAMT_PROBE_OUT");
  return d ? d : "";
}

// Written under a temporary name and renamed: the test never reads half a file.
void write_report(const std::string& path, const std::string& text) {
  {
    std::ofstream out(path + ".tmp");
    out << text;
  }
  std::rename((path + ".tmp").c_str(), path.c_str());
}

int64_t now() { return static_cast<int64_t>(std::time(nullptr)); }

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::atoi(v) : fallback;
}

void write_env(std::ofstream& out, const slurm::JobEnv& env) {
  out << "launcher=" << slurm::to_string(env.launcher) << "\n"
      << "scheduler=" << slurm::to_string(env.scheduler) << "\n"
      << "job_id=" << env.job_id << "\n"
      << "rank=" << env.rank << "\n"
      << "world_size=" << env.world_size << "\n"
      << "local_rank=" << env.local_rank << "\n"
      << "local_size=" << env.local_size << "\n"
      << "num_nodes=" << env.num_nodes << "\n"
      << "node=" << env.node << "\n"
      << "restart_count=" << env.restart_count << "\n"
      << "promised_ranks=" << slurm::launcher_promised_ranks() << "\n";
}

}  // namespace

TEST_CASE("probe: job environment", "[.probe]") {
  const std::string dir = probe_out();
  if (dir.empty()) return;
  const auto env = slurm::read_job_env();
  std::ofstream out(dir + "/env." + std::to_string(env.rank) + ".txt");
  write_env(out, env);
}

// Waits for the checkpoint signal, then does what the sweep coordinator does:
// classify, decide, and (rank 0 only, last) request the requeue.
//   MAMBAMT_PROBE_WAIT            seconds to wait for the signal (default 150)
//   MAMBAMT_PROBE_MAX_REQUEUES    sweep.max_requeues (default 5)
TEST_CASE("probe: checkpoint signal", "[.probe]") {
  const std::string dir = probe_out();
  if (dir.empty()) return;
  core::install_stop_handlers("USR2");
  const auto env = slurm::read_job_env();
  const std::string tag = std::to_string(env.restart_count) + "." + std::to_string(env.rank);
  write_report(dir + "/ready." + tag, "");

  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(env_int("MAMBAMT_PROBE_WAIT", 150));
  while (!core::stop_requested() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));

  std::string report;
  report += "signal=" + (core::stop_requested() ? core::signal_name(core::stop_signal()) : std::string("none")) + "\n";
  report += "restart_count=" + std::to_string(env.restart_count) + "\n";
  slurm::StopOutcome outcome;
  if (env.is_coordinator()) {
    outcome = slurm::decide_on_stop(env, core::stop_signal(), core::installed_checkpoint_signal(),
                                    env_int("MAMBAMT_PROBE_MAX_REQUEUES", 5), true, slurm::process_getenv(),
                                    now());
    report += "reason=" + slurm::to_string(outcome.reason) + "\n";
    report += "end_time=" + (outcome.end_time ? std::to_string(*outcome.end_time) : std::string("unknown")) + "\n";
    report += "seconds_left=" +
              (outcome.end_time ? std::to_string(*outcome.end_time - now()) : "") +
              "\n";
    report += "requeue=" + std::string(outcome.decision.requeue ? "yes" : "no") + "\n";
    report += "why=" + outcome.decision.why + "\n";
  }
  write_report(dir + "/probe." + tag, report);
  if (outcome.decision.requeue) slurm::request_requeue(env.job_id);  // ends the job: last
  core::uninstall_stop_handlers();
}
