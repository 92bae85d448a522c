#pragma once
// The one-node Slurm cluster the [slurm] tests run against.
//
// Under CTest the cluster is started once by the fixture test
// slurm_cluster_start (slurm/CMakeLists.txt) in <build>/slurm-cluster and
// stopped by slurm_cluster_stop. A test binary run by hand (or a cluster that is
// not up) gets a private cluster instead, started on first use and stopped when
// the process exits; it is marked with this process as owner, so if the process
// dies without cleaning up, the next start.sh stops it.
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <regex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>

#include "test_util.h"

namespace slurm_test {

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class Cluster {
 public:
  // The running cluster (started on first call when none is up).
  static Cluster& get() {
    static std::unique_ptr<Cluster> cluster(new Cluster());
    return *cluster;
  }

  const std::string& dir() const { return dir_; }
  std::string conf() const { return dir_ + "/slurm.conf"; }

  // Runs a shell command against this cluster (SLURM_CONF set).
  CommandResult run(const std::string& cmd) const {
    return run_shell("SLURM_CONF=" + shell_quote(conf()) + " bash -c " + shell_quote(cmd));
  }

  // `env` sbatch --parsable <args> (env: "NAME=value ..." for the job, which
  // inherits the submitting environment); throws with sbatch's output on failure.
  std::string submit(const std::string& args, const std::string& env = "") const {
    auto r = run(env + " sbatch --parsable " + args);
    if (r.code != 0) throw std::runtime_error("sbatch " + args + " failed: " + r.output);
    std::string id = r.output.substr(0, r.output.find_first_of(";\n"));
    return id;
  }

  // The job's state ("" once Slurm has forgotten it).
  std::string state(const std::string& job) const {
    auto r = run("squeue -h -j " + job + " -o %T 2>/dev/null || true");
    std::string s = r.output;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    if (!s.empty()) return s;
    // Finished jobs leave squeue after MinJobAge; scontrol still knows them.
    r = run("scontrol show job -o " + job + " 2>/dev/null | sed -n 's/.*JobState=\\([A-Z_]*\\).*/\\1/p'");
    s = r.output;
    while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
    return s;
  }

  // Waits until the job is in one of `states`; returns the last state seen.
  std::string wait_for(const std::string& job, const std::set<std::string>& states, int timeout_s) const {
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
    std::string s;
    while (std::chrono::steady_clock::now() < end) {
      s = state(job);
      if (states.count(s)) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return s;
  }

  std::string wait_done(const std::string& job, int timeout_s) const {
    return wait_for(job, {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED"},
                    timeout_s);
  }

  // Seconds the job has run in its current run (scontrol's RunTime); -1 when unknown.
  int run_seconds(const std::string& job) const {
    const std::string info = run("scontrol show job -o " + job).output;
    const std::regex rt(R"(RunTime=(?:(\d+)-)?(\d+):(\d+):(\d+))");
    std::smatch m;
    if (!std::regex_search(info, m, rt)) return -1;
    const int days = m[1].matched ? std::stoi(m[1].str()) : 0;
    return ((days * 24 + std::stoi(m[2].str())) * 60 + std::stoi(m[3].str())) * 60 + std::stoi(m[4].str());
  }

  // Sets a job's time limit (whole minutes; Slurm keeps no seconds).
  void set_time_limit(const std::string& job, int minutes) const {
    const auto r = run("scontrol update JobId=" + job + " TimeLimit=" + std::to_string(minutes));
    if (r.code != 0) throw std::runtime_error("scontrol update TimeLimit of job " + job + " failed: " + r.output);
  }

  // Brings a running job's time limit so close that its --signal=...@lead_s
  // comes at slurmctld's next time-limit check (every 30 s): the limit becomes
  // the whole minutes of RunTime + lead_s, which leaves between lead_s - 60 and
  // lead_s seconds. With lead_s >= 120 the job has at least 30 s between the
  // signal and the limit. Returns the seconds left at the new limit.
  int cut_time_limit(const std::string& job, int lead_s) const {
    if (lead_s < 120) throw std::invalid_argument("cut_time_limit: lead_s under 120 leaves under 30 s after the signal");
    const int ran = run_seconds(job);
    if (ran < 0) throw std::runtime_error("cut_time_limit: no RunTime for job " + job);
    const int minutes = (ran + lead_s) / 60;
    set_time_limit(job, minutes);
    return minutes * 60 - ran;
  }

  ~Cluster() {
    if (!owned_) return;
    run_shell(source_dir() + "/slurm/cluster/stop.sh " + shell_quote(dir_) + " >/dev/null 2>&1");
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

 private:
  Cluster() {
    const char* env_dir = std::getenv("MAMBAMT_SLURM_CLUSTER");
    std::string candidate;
    if (env_dir && *env_dir) {
      candidate = env_dir;
    } else {
      // The CTest fixture's cluster: <build>/slurm-cluster, <build>/bin/mambamt being the binary.
      candidate = std::filesystem::path(mambamt_binary()).parent_path().parent_path().string() + "/slurm-cluster";
    }
    if (is_up(candidate)) {
      dir_ = candidate;
    } else {
      std::string base = std::filesystem::temp_directory_path().string() + "/mambamt-slurm-XXXXXX";
      if (!::mkdtemp(base.data())) throw std::runtime_error("mkdtemp failed");
      dir_ = base;
      owned_ = true;
      auto r = run_shell(source_dir() + "/slurm/cluster/start.sh " + shell_quote(dir_) + " --owner " +
                         std::to_string(::getpid()));
      if (r.code != 0) throw std::runtime_error("could not start the test cluster: " + r.output);
    }
    ::setenv("SLURM_CONF", conf().c_str(), 1);
  }

  static bool is_up(const std::string& dir) {
    if (!std::filesystem::exists(dir + "/slurm.conf")) return false;
    // A stopped cluster leaves its files: ask sinfo (which waits for a dead
    // controller) only when slurmctld is alive.
    std::string pid = read_text(dir + "/pid/slurmctld.pid");
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    if (pid.empty() || !std::filesystem::exists("/proc/" + pid)) return false;
    auto r = run_shell("SLURM_CONF=" + shell_quote(dir + "/slurm.conf") + " timeout 10 sinfo -h -o %T");
    return r.code == 0 && (r.output.find("idle") != std::string::npos || r.output.find("mix") != std::string::npos ||
                           r.output.find("alloc") != std::string::npos);
  }

  std::string dir_;
  bool owned_ = false;
};

}  // namespace slurm_test
