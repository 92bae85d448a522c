// On a real one-node Slurm cluster (tests/slurm/cluster_fixture.h): the
// generated configuration, srun --mpi=pmix with Debian's OpenMPI, the job
// scripts under sbatch (--test-only and for real, with a stand-in for the
// mambamt binary), signal delivery at the time limit, and requeues.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <thread>

#include "cluster_fixture.h"
#include "slurm/batch_script.h"
#include "test_util.h"

using slurm_test::Cluster;
using slurm_test::shell_quote;
namespace fs = std::filesystem;

namespace {

std::string self_exe() { return fs::read_symlink("/proc/self/exe").string(); }

std::map<std::string, std::string> read_kv(const std::string& path) {
  std::map<std::string, std::string> kv;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const auto eq = line.find('=');
    if (eq != std::string::npos) kv[line.substr(0, eq)] = line.substr(eq + 1);
  }
  return kv;
}

bool wait_for_file(const std::string& path, int timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s);
  while (!fs::exists(path) && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  return fs::exists(path);
}

// A stand-in for the mambamt binary (MAMBAMT_BIN) that records how it was
// called and then, by MAMBAMT_FAKE_MODE: "probe" runs the checkpoint-signal
// probe of this test binary, "requeue" requeues its own job and waits to be
// killed, anything else ends at once.
std::string write_fake_mambamt(const TempDir& tmp) {
  const std::string path = tmp.path("bin/mambamt");
  write_text(path,
             "#!/bin/bash\n"
             "echo \"$* | rank ${SLURM_PROCID:-?} of ${SLURM_NTASKS:-?} restart ${SLURM_RESTART_COUNT:-0} "
             "job ${SLURM_JOB_ID:-?} cwd $PWD\" >> \"$MAMBAMT_PROBE_OUT/calls\"\n"
             "case ${MAMBAMT_FAKE_MODE:-} in\n"
             "  probe) exec " + shell_quote(self_exe()) + " 'probe: checkpoint signal' >/dev/null ;;\n"
             "  requeue) scontrol requeue \"$SLURM_JOB_ID\"; sleep 60 ;;\n"
             "esac\n"
             "exit 0\n");
  fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::others_read);
  return path;
}

std::string job_script(const std::string& name) { return source_dir() + "/jobs/" + name; }

// Cancels whatever a test left behind, so the next one starts on an empty node.
struct CancelAll {
  ~CancelAll() { Cluster::get().run("scancel --user=root; sleep 1"); }
};

}  // namespace

TEST_CASE("the test cluster is up and its slurm.conf is the saved copy with this machine's values", "[slurm]") {
  const Cluster& c = Cluster::get();
  const auto sinfo = c.run("sinfo -h -o '%P %a %D %T'");
  CHECK(sinfo.code == 0);
  CHECK(std::regex_search(sinfo.output, std::regex(R"(debug\* up 1 (idle|mixed|allocated))")));

  std::string conf = read_text(c.conf());
  auto replace_all = [&conf](const std::string& from, const std::string& to) {
    for (size_t pos = 0; (pos = conf.find(from, pos)) != std::string::npos; pos += to.size())
      conf.replace(pos, from.size(), to);
  };
  // Put the placeholders back in place of this machine's values.
  std::string rt = c.dir();
  if (fs::exists(c.dir() + "/runtime")) {
    rt = read_text(c.dir() + "/runtime");
    rt.erase(rt.find_last_not_of("\n") + 1);
  }
  replace_all("socket=" + rt + "/", "socket=@RUNTIME@/");
  replace_all("SlurmdSpoolDir=" + rt + "/", "SlurmdSpoolDir=@RUNTIME@/");
  replace_all("TmpFS=" + rt + "/", "TmpFS=@RUNTIME@/");
  replace_all(c.dir() + "/", "@DIR@/");
  std::istringstream ports(read_text(c.dir() + "/ports"));
  std::string ctld_port, slurmd_port;
  ports >> ctld_port >> slurmd_port;
  replace_all("Port=" + ctld_port + "\n", "Port=@CTLD_PORT@\n");
  replace_all("SlurmdPort=" + slurmd_port + "\n", "SlurmdPort=@SLURMD_PORT@\n");
  const std::string probe = run_command("slurmd -C | head -n 1");
  std::smatch m;
  REQUIRE(std::regex_search(probe, m, std::regex(R"(^NodeName=(\S+) (.*RealMemory=\d+))")));
  const std::string node = m[1].str(), hw = m[2].str();
  replace_all(" " + hw + " ", " @HW@ ");
  replace_all("=" + node + " ", "=@NODE@ ");
  replace_all("=" + node + "(", "=@NODE@(");
  conf = std::regex_replace(conf, std::regex(R"(DefMemPerCPU=\d+)"), "DefMemPerCPU=@DEF_MEM@");
  // MpiDefault is pmix exactly when srun offers pmix.
  const bool pmix = c.run("srun --mpi=list").output.find("pmix") != std::string::npos;
  CHECK(conf.find(pmix ? "MpiDefault=pmix\n" : "MpiDefault=none\n") != std::string::npos);
  replace_all(pmix ? "MpiDefault=pmix\n" : "MpiDefault=none\n", "MpiDefault=@MPI@\n");
  CHECK(conf == read_text(source_dir() + "/tests/slurm/data/slurm.conf.expected"));
}

TEST_CASE("srun --mpi=pmix starts Debian's OpenMPI ranks as one world", "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  const auto list = c.run("srun --mpi=list");
  INFO(list.output);
  REQUIRE(list.output.find("pmix") != std::string::npos);

  TempDir tmp;
  write_text(tmp.path("hello.c"),
             "#include <mpi.h>\n#include <stdio.h>\n"
             "int main(int argc, char** argv) {\n"
             "  MPI_Init(&argc, &argv);\n"
             "  int r, n, one = 1, sum = 0;\n"
             "  MPI_Comm_rank(MPI_COMM_WORLD, &r); MPI_Comm_size(MPI_COMM_WORLD, &n);\n"
             "  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);\n"
             "  printf(\"rank %d of %d sum %d\\n\", r, n, sum);\n"
             "  MPI_Finalize(); return 0;\n}\n");
  const auto cc = run_shell("mpicc -o " + tmp.path("hello") + " " + tmp.path("hello.c"));
  INFO(cc.output);
  REQUIRE(cc.code == 0);

  auto r = c.run("srun --mpi=pmix -n 2 " + tmp.path("hello") + " | sort");
  INFO(r.output);
  CHECK(r.code == 0);
  CHECK(r.output == "rank 0 of 2 sum 2\nrank 1 of 2 sum 2\n");

  // Without PMIx, Debian's OpenMPI 4.1 refuses to start under srun; never a 2-rank world.
  r = c.run("srun --mpi=none -n 2 " + tmp.path("hello"));
  INFO(r.output);
  CHECK(r.code != 0);
  CHECK(r.output.find(" of 2 ") == std::string::npos);
  // Run in the batch shell itself (no srun), the binary is a singleton although 2
  // tasks were asked for: the mistake launcher_promised_ranks() catches.
  const std::string job = c.submit("-n 2 --cpus-per-task=1 --output=" + tmp.path("single.out") + " --wrap " +
                                       shell_quote(tmp.path("hello") + " && " + self_exe() + " 'probe: job environment' >/dev/null"),
                                   "MAMBAMT_PROBE_OUT=" + tmp.dir());
  CHECK(c.wait_done(job, 60) == "COMPLETED");
  CHECK(read_text(tmp.path("single.out")).rfind("rank 0 of 1 sum 1\n", 0) == 0);
  auto batch = read_kv(tmp.path("env.0.txt"));
  CHECK(batch["world_size"] == "1");
  CHECK(batch["promised_ranks"] == "2");
  fs::remove(tmp.path("env.0.txt"));

  // What the library reads inside the step.
  r = c.run("MAMBAMT_PROBE_OUT=" + tmp.dir() + " srun --mpi=pmix -n 2 " + self_exe() + " 'probe: job environment'");
  INFO(r.output);
  REQUIRE(r.code == 0);
  for (int rank = 0; rank < 2; ++rank) {
    auto kv = read_kv(tmp.path("env." + std::to_string(rank) + ".txt"));
    CHECK(kv["launcher"] == "slurm");
    CHECK(kv["scheduler"] == "slurm");
    CHECK(kv["rank"] == std::to_string(rank));
    CHECK(kv["world_size"] == "2");
    CHECK(kv["local_rank"] == std::to_string(rank));
    CHECK(kv["local_size"] == "2");
    CHECK(kv["promised_ranks"] == "2");
    CHECK(kv["restart_count"] == "0");
    CHECK_FALSE(kv["job_id"].empty());
  }
}

TEST_CASE("every job script passes sbatch --test-only", "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  TempDir tmp;
  // One CPU per task and one task per node: this node has 2 CPUs and no GPUs;
  // the command line overrides the scripts' cluster-sized requests.
  const std::string fit = "--chdir=" + tmp.dir() + " --ntasks-per-node=1 --cpus-per-task=1 ";
  for (const char* name : {"ablation_grid.slurm", "debug_single_node.slurm", "collect.slurm"}) {
    INFO(name);
    const auto r = c.run("sbatch --test-only " + fit + job_script(name) + " arg");
    INFO(r.output);
    CHECK(r.code == 0);
    CHECK(r.output.find("to start at") != std::string::npos);
  }
  // The commented-out cluster settings are options sbatch knows (their values
  // name resources this cluster lacks, so only "unknown option" is a failure).
  for (const char* name : {"ablation_grid.slurm", "debug_single_node.slurm", "collect.slurm"}) {
    std::istringstream lines(read_text(job_script(name)));
    std::string line;
    while (std::getline(lines, line)) {
      if (line.rfind("##SBATCH ", 0) != 0) continue;
      const std::string option = line.substr(9);
      const auto r = c.run("sbatch --test-only " + fit + option + " " + job_script(name) + " arg");
      INFO(name << ": " << option << ": " << r.output);
      CHECK(r.output.find("unrecognized option") == std::string::npos);
      CHECK(r.output.find("invalid option") == std::string::npos);
    }
  }
}

TEST_CASE("scontrol requeue of a running job brings it back with SLURM_RESTART_COUNT + 1", "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  TempDir tmp;
  write_text(tmp.path("job.sh"),
             "#!/bin/bash\n#SBATCH --requeue\n#SBATCH --open-mode=append\n"
             "echo \"run restart=${SLURM_RESTART_COUNT:-0}\"\n"
             "[ \"${SLURM_RESTART_COUNT:-0}\" -ge 1 ] && { echo finished; exit 0; }\n"
             "sleep 120\n");
  const std::string job = c.submit("--chdir=" + tmp.dir() + " --output=" + tmp.path("out") + " " + tmp.path("job.sh"));
  REQUIRE(c.wait_for(job, {"RUNNING"}, 60) == "RUNNING");
  REQUIRE(wait_for_file(tmp.path("out"), 30));
  const auto rq = c.run("scontrol requeue " + job);
  INFO(rq.output);
  REQUIRE(rq.code == 0);
  CHECK(c.wait_done(job, 120) == "COMPLETED");
  const std::string out = read_text(tmp.path("out"));
  INFO(out);
  CHECK(out.find("run restart=0\n") != std::string::npos);
  CHECK(out.find("DUE TO JOB REQUEUE") != std::string::npos);
  CHECK(out.find("run restart=1\nfinished\n") != std::string::npos);
  CHECK(c.run("scontrol show job -o " + job).output.find("Restarts=1") != std::string::npos);
}

TEST_CASE("ablation_grid.slurm: the time-limit signal reaches the ranks, rank 0 requeues, the cap stops it",
          "[slurm]") {
  // The real job script with a stand-in binary whose ranks run the
  // checkpoint-signal probe, under --signal=B:USR2@120 and a limit far away.
  // Once both ranks of a run have installed their handlers, the test cuts the
  // job's limit (Cluster::cut_time_limit) so that Slurm sends USR2 to the batch
  // shell at its next time-limit check; the trap passes it to srun, srun to
  // both ranks. Rank 0 classifies it (end time from scontrol) as the time limit
  // and requeues (max_requeues 1), and the test gives the limit back before the
  // job starts again (a restart under the cut limit would get the signal before
  // its handlers are in place, and USR2's default action kills). The second run
  // is cut the same way, gets the signal again and stops at the cap.
  constexpr int kLead = 120;
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  TempDir tmp;
  const std::string fake = write_fake_mambamt(tmp);
  write_text(tmp.path("grid.toml"), "[sweep]\nname = \"probe\"\n");
  const std::string env = "MAMBAMT_BIN=" + fake + " MAMBAMT_PROBE_OUT=" + tmp.dir() +
                          " MAMBAMT_FAKE_MODE=probe MAMBAMT_SIGNAL_LEAD=" + std::to_string(kLead) +
                          " MAMBAMT_PROBE_MAX_REQUEUES=1 ";
  const std::string job = c.submit("--time=30 --signal=B:USR2@" + std::to_string(kLead) +
                                       " --ntasks-per-node=2 --cpus-per-task=1 --chdir=" + tmp.dir() +
                                       " --output=" + tmp.path("out") + " " + job_script("ablation_grid.slurm") +
                                       " grid.toml --retry-failed",
                                   env);
  // Waits for a file the probes write; without it, fails with the job's output so far.
  const auto await = [&](const std::string& name, int timeout_s) {
    if (!wait_for_file(tmp.path(name), timeout_s))
      FAIL("no " << name << " after " << timeout_s << " s; the job's output:\n" << read_text(tmp.path("out")));
  };
  for (const std::string run : {"0", "1"}) {
    INFO("run " << run);
    await("ready." + run + ".0", 120);
    await("ready." + run + ".1", 30);
    const int left = c.cut_time_limit(job, kLead);
    INFO(left << " s left at the cut limit");
    await("probe." + run + ".0", 60);
    if (run == "0") c.set_time_limit(job, 30);
  }
  CHECK(c.wait_done(job, 120) == "COMPLETED");
  const std::string out = read_text(tmp.path("out"));
  INFO(out);
  INFO(read_text(tmp.path("calls")));

  // First run: both ranks got USR2, rank 0 saw the time limit and requeued.
  auto first = read_kv(tmp.path("probe.0.0"));
  CHECK(first["signal"] == "USR2");
  CHECK(first["reason"] == "time_limit");
  CHECK(first["requeue"] == "yes");
  CHECK(std::stoi(first["seconds_left"]) > 0);
  CHECK(std::stoi(first["seconds_left"]) <= kLead);
  CHECK(read_kv(tmp.path("probe.0.1"))["signal"] == "USR2");
  // Second run: SLURM_RESTART_COUNT=1, the signal again, the cap reached.
  auto second = read_kv(tmp.path("probe.1.0"));
  CHECK(second["restart_count"] == "1");
  CHECK(second["signal"] == "USR2");
  CHECK(second["reason"] == "time_limit");
  CHECK(second["requeue"] == "no");
  CHECK(second["why"].find("cap reached") != std::string::npos);

  // The script: the trap fired in both runs, the binary got the sweep command line in the submit directory.
  CHECK(std::regex_search(out, std::regex("restart 0 on 1 node.*\\n(.|\\n)*got SIGUSR2, passing it to the sweep")));
  CHECK(out.find("mambamt sweep: job " + job + " restart 1") != std::string::npos);
  CHECK(out.find("sweep step ended with exit code 0") != std::string::npos);
  const std::string calls = read_text(tmp.path("calls"));
  CHECK(calls.find("sweep grid.toml --retry-failed | rank 0 of 2 restart 0 job " + job + " cwd " + tmp.dir()) !=
        std::string::npos);
  CHECK(calls.find("sweep grid.toml --retry-failed | rank 1 of 2 restart 1") != std::string::npos);
}

TEST_CASE("ablation_grid.slurm refuses to start past MAMBAMT_MAX_RESTARTS", "[slurm]") {
  // The stand-in requeues its own job on every run: the second run is restart 1, over a cap of 0.
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  TempDir tmp;
  const std::string fake = write_fake_mambamt(tmp);
  const std::string job = c.submit("--ntasks-per-node=1 --cpus-per-task=1 --chdir=" + tmp.dir() + " --output=" +
                                       tmp.path("out") + " " + job_script("ablation_grid.slurm") + " grid.toml",
                                   "MAMBAMT_BIN=" + fake + " MAMBAMT_PROBE_OUT=" + tmp.dir() +
                                       " MAMBAMT_FAKE_MODE=requeue MAMBAMT_MAX_RESTARTS=0");
  CHECK(c.wait_done(job, 120) == "FAILED");
  const std::string out = read_text(tmp.path("out"));
  INFO(out);
  CHECK(out.find("restart 1 is over the cap MAMBAMT_MAX_RESTARTS=0: not starting") != std::string::npos);
  const std::string calls = read_text(tmp.path("calls"));
  INFO(calls);
  CHECK(calls.find("restart 0") != std::string::npos);
  CHECK(calls.find("restart 1") == std::string::npos);  // the binary did not run again
}

TEST_CASE("submit_sweep.sh chains the collector after the sweep, debug_single_node.slurm trains one experiment",
          "[slurm]") {
  const Cluster& c = Cluster::get();
  CancelAll cancel;
  TempDir tmp;
  const std::string fake = write_fake_mambamt(tmp);
  write_text(tmp.path("configs/tiny.toml"),
             "# a grid\n[sweep]\nname = \"tiny-sweep\"   # label\noutput_dir = \"out/runs\"\n[base]\n"
             "[grid]\n\"model.d_state\" = [16, 32]\n");
  // The sweep stand-in takes a few seconds, so the collector is seen waiting on it.
  write_text(tmp.path("bin/slow"), "#!/bin/bash\n[ \"$1\" = sweep ] && sleep 6\nexec " + fake + " \"$@\"\n");
  fs::permissions(tmp.path("bin/slow"), fs::perms::owner_all);
  const auto r = c.run("cd " + tmp.dir() + " && MAMBAMT_BIN=" + tmp.path("bin/slow") + " MAMBAMT_PROBE_OUT=" +
                       tmp.dir() + " " + source_dir() +
                       "/jobs/submit_sweep.sh configs/tiny.toml -- --ntasks-per-node=1 --cpus-per-task=1 --output=" + tmp.path("sweep.out"));
  INFO(r.output);
  REQUIRE(r.code == 0);
  std::smatch m;
  REQUIRE(std::regex_search(r.output, m, std::regex(R"(sweep (\d+)\ncollect (\d+)\n)")));
  const std::string sweep = m[1].str(), collect = m[2].str();
  const auto deps = c.run("scontrol show job -o " + collect).output;
  CHECK(deps.find("Dependency=afterany:" + sweep) != std::string::npos);
  CHECK(c.state(collect) == "PENDING");
  CHECK(c.wait_done(sweep, 60) == "COMPLETED");
  CHECK(c.wait_done(collect, 60) == "COMPLETED");
  std::string calls = read_text(tmp.path("calls"));
  INFO(calls);
  CHECK(calls.find("sweep configs/tiny.toml | rank 0 of 1") != std::string::npos);
  // RUN_DIR from the grid's [sweep] table: output_dir/name.
  CHECK(calls.find("collect out/runs/tiny-sweep | ") != std::string::npos);
  CHECK(calls.find("sweep ") < calls.find("collect "));

  const std::string debug = c.submit("--cpus-per-task=1 --chdir=" + tmp.dir() + " --output=" + tmp.path("debug.out") +
                                         " " + job_script("debug_single_node.slurm") + " configs/exp1.toml",
                                     "MAMBAMT_BIN=" + fake + " MAMBAMT_PROBE_OUT=" + tmp.dir());
  CHECK(c.wait_done(debug, 60) == "COMPLETED");
  calls = read_text(tmp.path("calls"));
  CHECK(calls.find("train configs/exp1.toml --out runs/debug/exp1 | rank 0 of 1") != std::string::npos);
  // A missing binary is a clear error, not a cryptic srun failure.
  const std::string missing = c.submit("--cpus-per-task=1 --chdir=" + tmp.dir() + " --output=" + tmp.path("m.out") +
                                           " " + job_script("collect.slurm") + " runs/x",
                                       "MAMBAMT_BIN=" + tmp.path("nope"));
  CHECK(c.wait_done(missing, 60) == "FAILED");
  CHECK(read_text(tmp.path("m.out")).find("mambamt binary '" + tmp.path("nope") + "' not found") != std::string::npos);
}
