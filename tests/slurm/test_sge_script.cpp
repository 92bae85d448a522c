// jobs/ablation_grid.sge run by bash with Grid Engine's environment faked and
// a stand-in mpirun on PATH (no Grid Engine here): array tasks pick their grid,
// SGE_HGR_gpu becomes CUDA_VISIBLE_DEVICES, USR1 (s_rt) reaches the ranks as
// USR2, and an interrupted sweep exits 99 (reschedule) until the cap.
#include <catch2/catch.hpp>
#include <filesystem>
#include <string>

#include "test_util.h"

namespace fs = std::filesystem;

namespace {

struct SgeRun {
  int rc = -1;
  std::string out;    // the script's output
  std::string calls;  // what the stand-in mpirun saw
};

class FakeSge {
 public:
  FakeSge() {
    // mpirun: records its arguments and environment; with MPIRUN_WAIT=1 it
    // waits for USR2 like checkpointing ranks would (exit 1: interrupted).
    write_text(tmp_.path("bin/mpirun"),
               "#!/bin/bash\n"
               "echo \"args=$*\" >> calls\n"
               "echo \"cuda=${CUDA_VISIBLE_DEVICES:-}\" >> calls\n"
               "if [ \"${MPIRUN_WAIT:-0}\" = 1 ]; then\n"
               "  trap 'echo got=USR2 >> calls; kill $! 2>/dev/null; exit 1' USR2\n"
               "  touch ready\n"
               "  sleep 30 & wait\n"
               "  exit 4\n"
               "fi\n"
               "exit 0\n");
    fs::permissions(tmp_.path("bin/mpirun"), fs::perms::owner_all);
    write_text(tmp_.path("bin/mambamt"), "#!/bin/bash\nexit 0\n");
    fs::permissions(tmp_.path("bin/mambamt"), fs::perms::owner_all);
    write_text(tmp_.path("grids.txt"), "# one grid per array task\nconfigs/a.toml\n\nconfigs/b.toml\n");
  }
  const TempDir& tmp() const { return tmp_; }

  // Runs the script; with `signal` set, sends it to the script once mpirun is up.
  SgeRun run(const std::string& env, const std::string& args, const std::string& signal = "") const {
    // The script itself in the background (not the cd/rm list), so that $pid is the script's bash.
    std::string cmd = "cd " + tmp_.dir() + " && rm -f ready calls || exit 1; env -u SLURM_JOB_ID PATH=" + tmp_.path("bin") +
                      ":$PATH JOB_ID=4242 NSLOTS=2 SGE_O_WORKDIR=" + tmp_.dir() + " MAMBAMT_BIN=" +
                      tmp_.path("bin/mambamt") + " " + env + " bash " + source_dir() + "/jobs/ablation_grid.sge " +
                      args + " > out 2>&1 & pid=$!; ";
    if (!signal.empty())
      cmd += "for i in $(seq 1 100); do [ -f " + tmp_.path("ready") + " ] && break; sleep 0.1; done; kill -" + signal +
             " $pid; ";
    cmd += "wait $pid; echo $?";
    SgeRun r;
    const auto res = run_shell(cmd);
    r.rc = std::stoi(res.output);
    r.out = read_text(tmp_.path("out"));
    r.calls = read_text(tmp_.path("calls"));
    return r;
  }

 private:
  TempDir tmp_;
};

}  // namespace

TEST_CASE("ablation_grid.sge: an array task runs its grid on the granted GPUs") {
  FakeSge sge;
  const auto r = sge.run("SGE_TASK_ID=2 SGE_HGR_gpu='gpu0 gpu3'", "grids.txt --retry-failed");
  INFO(r.out);
  CHECK(r.rc == 0);
  CHECK(r.calls == "args=-np 2 " + sge.tmp().path("bin/mambamt") + " sweep configs/b.toml --retry-failed\ncuda=0,3\n");
  CHECK(r.out.find("job 4242 task 2 restart 0, 2 ranks (NSLOTS=2)") != std::string::npos);
  // Not an array job: the argument is the grid; a site's own CUDA_VISIBLE_DEVICES is kept.
  const auto single = sge.run("SGE_TASK_ID=undefined SGE_HGR_gpu=1 CUDA_VISIBLE_DEVICES=0", "configs/c.toml");
  CHECK(single.calls.find("sweep configs/c.toml\ncuda=0\n") != std::string::npos);
  // An array task without a line of its own.
  const auto missing = sge.run("SGE_TASK_ID=3", "grids.txt");
  CHECK(missing.rc == 2);
  CHECK(missing.out.find("no line 3 in grids.txt") != std::string::npos);
}

TEST_CASE("ablation_grid.sge: the soft limit's USR1 checkpoints the ranks and reschedules with exit 99") {
  FakeSge sge;
  const std::string counter = sge.tmp().path(".mambamt-restarts-4242");
  auto r = sge.run("MPIRUN_WAIT=1 SGE_TASK_ID=undefined MAMBAMT_MAX_RESTARTS=1", "configs/a.toml", "USR1");
  INFO(r.out);
  CHECK(r.calls.find("got=USR2") != std::string::npos);
  CHECK(r.out.find("got SIGUSR1, asking the sweep to checkpoint (USR2)") != std::string::npos);
  CHECK(r.rc == 99);
  CHECK(read_text(counter) == "1\n");

  // Rescheduled (same JOB_ID): restart 1, the -notify USR2 this time, the cap reached.
  r = sge.run("MPIRUN_WAIT=1 SGE_TASK_ID=undefined MAMBAMT_MAX_RESTARTS=1", "configs/a.toml", "USR2");
  INFO(r.out);
  CHECK(r.out.find("restart 1") != std::string::npos);
  CHECK(r.calls.find("got=USR2") != std::string::npos);
  CHECK(r.rc == 1);
  CHECK(r.out.find("restart cap MAMBAMT_MAX_RESTARTS=1 is reached") != std::string::npos);

  // A sweep that finishes clears the counter.
  r = sge.run("SGE_TASK_ID=undefined", "configs/a.toml");
  CHECK(r.rc == 0);
  CHECK_FALSE(fs::exists(counter));
}
