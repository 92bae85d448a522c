// The batch-script checker, the job scripts in jobs/ (without a cluster:
// syntax, settings kept in step) and the test cluster's generated slurm.conf
// against its saved copy.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include "core/error.h"
#include "slurm/batch_script.h"
#include "test_util.h"

using namespace mambamt::slurm;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> job_scripts(const std::string& ext) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(source_dir() + "/jobs"))
    if (e.path().extension() == ext) out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

std::string option_value(const std::vector<Directive>& ds, const std::string& option) {
  for (const auto& d : ds)
    if (d.option == option) return d.value;
  return "";
}

}  // namespace

TEST_CASE("directives are read up to comments, commented-out settings are not directives") {
  const std::string text =
      "#!/bin/bash\n"
      "#SBATCH --time=1:00:00   # one hour\n"
      "#SBATCH -N 2\n"
      "##SBATCH --partition=gpu\n"
      "# #SBATCH --qos=gpu\n"
      "#SBATCHX --nope\n"
      "#$ -l h_rt=02:00:00 -notify\n"
      "echo hi\n";
  const auto ds = parse_directives(text, "#SBATCH");
  REQUIRE(ds.size() == 2);
  CHECK(ds[0].line == 2);
  CHECK(ds[0].option == "--time");
  CHECK(ds[0].value == "1:00:00");
  CHECK(ds[1].option == "-N");
  CHECK(ds[1].value == "2");
  const auto sge = parse_directives(text, "#$");
  REQUIRE(sge.size() == 2);
  CHECK(sge[0].option == "-l");
  CHECK(sge[0].value == "h_rt=02:00:00");
  CHECK(sge[1].option == "-notify");
  CHECK(sge[1].value.empty());
}

TEST_CASE("sbatch --signal values") {
  auto s = parse_signal_option("B:USR2@300");
  CHECK(s.batch_shell_only);
  CHECK(s.signal == "USR2");
  CHECK(s.lead_s == 300);
  s = parse_signal_option("SIGUSR1");
  CHECK_FALSE(s.batch_shell_only);
  CHECK(s.signal == "USR1");
  CHECK(s.lead_s == 60);
  CHECK(parse_signal_option("R:10@30").signal == "10");
  CHECK_THROWS_AS(parse_signal_option("B:USR2@soon"), mambamt::InputError);
  CHECK_THROWS_AS(parse_signal_option("X:USR2"), mambamt::InputError);
}

TEST_CASE("the checker finds what sbatch accepts silently") {
  const std::string good =
      "#!/bin/bash\n#SBATCH --requeue\n#SBATCH --open-mode=append\n#SBATCH --signal=B:USR2@120\n"
      "#SBATCH --time=2:00:00\ntrap 'kill -USR2 $pid' USR2\nsrun x & pid=$!; wait\n";
  CHECK(check_sbatch_script(good, "good.slurm").empty());

  const std::string bad =
      "#SBATCH --requeue\n"                  // no #! line; requeue without append
      "#SBATCH --signal=B:USR2@120\n"        // no trap for USR2
      "#SBATCH --time=2h\n"                  // malformed
      "echo start\n"
      "#SBATCH --nodes=2\n";                 // after the first command: ignored
  const auto problems = check_sbatch_script(bad, "bad.slurm");
  const std::string all = [&] {
    std::string s;
    for (const auto& p : problems) s += p + "\n";
    return s;
  }();
  INFO(all);
  CHECK(problems.size() == 5);
  CHECK(all.find("bad.slurm:1: no #! line") != std::string::npos);
  CHECK(all.find("bad.slurm:1: --requeue without --open-mode=append") != std::string::npos);
  CHECK(all.find("bad.slurm:2: --signal=B:USR2@120 goes to the batch shell, which has no 'trap ... USR2'") !=
        std::string::npos);
  CHECK(all.find("bad.slurm:3: --time:") != std::string::npos);
  CHECK(all.find("bad.slurm:5: --nodes comes after the first command (line 4): sbatch ignores it") !=
        std::string::npos);
  // A trap in a loop over signal names counts; a trap in a comment does not.
  CHECK(check_sbatch_script("#!/bin/bash\n#SBATCH --signal=B:USR1@60\nfor s in USR1 TERM; do\n  trap \"f $s\" \"$s\"\ndone\n",
                            "loop.slurm")
            .empty());
  CHECK(check_sbatch_script("#!/bin/bash\n#SBATCH --signal=B:USR1@60\n# trap '' USR1\n", "c.slurm").size() == 1);
  CHECK(check_sbatch_script("#!/bin/bash\n#SBATCH --signal=B:KILL@60\ntrap x KILL\n", "k.slurm").size() == 1);
}

TEST_CASE("every job script passes bash -n and the checker") {
  std::vector<std::string> scripts = job_scripts(".slurm");
  for (const auto& s : job_scripts(".sge")) scripts.push_back(s);
  scripts.push_back(source_dir() + "/jobs/submit_sweep.sh");
  for (const char* s : {"start.sh", "stop.sh", "gen_conf.sh"}) scripts.push_back(source_dir() + "/slurm/cluster/" + s);
  // The set-up, build, demo, test and GPU scripts, and CI's entry point.
  for (const auto& e : fs::directory_iterator(source_dir() + "/scripts"))
    if (e.path().extension() == ".sh") scripts.push_back(e.path().string());
  scripts.push_back(source_dir() + "/.ci/run");
  REQUIRE(scripts.size() >= 17);
  for (const auto& path : scripts) {
    INFO(path);
    const auto r = run_shell("bash -n " + path);
    CHECK(r.output.empty());
    CHECK(r.code == 0);
    CHECK((fs::status(path).permissions() & fs::perms::owner_exec) != fs::perms::none);
  }
  for (const auto& path : job_scripts(".slurm")) {
    std::string problems;
    for (const auto& p : check_sbatch_script(read_text(path), path)) problems += p + "\n";
    CHECK(problems == "");
  }
  // shellcheck (installed by scripts/setup.sh) finds the bash mistakes bash -n cannot.
  REQUIRE(run_shell("command -v shellcheck").code == 0);
  for (const auto& path : scripts) {
    const auto r = run_shell("shellcheck -S warning -s bash " + path);
    INFO(r.output);
    CHECK(r.code == 0);
  }
}

TEST_CASE("ablation_grid.slurm keeps its settings in step") {
  const std::string path = source_dir() + "/jobs/ablation_grid.slurm";
  const std::string text = read_text(path);
  const auto ds = parse_directives(text, "#SBATCH");
  CHECK(option_value(ds, "--open-mode") == "append");
  CHECK(std::any_of(ds.begin(), ds.end(), [](const Directive& d) { return d.option == "--requeue"; }));
  const auto signal = parse_signal_option(option_value(ds, "--signal"));
  CHECK(signal.batch_shell_only);
  CHECK(signal.signal == "USR2");
  // The lead the sweep assumes (MAMBAMT_SIGNAL_LEAD) is the one Slurm is asked for.
  std::smatch m;
  REQUIRE(std::regex_search(text, m, std::regex(R"(MAMBAMT_SIGNAL_LEAD=\$\{MAMBAMT_SIGNAL_LEAD:-([0-9]+)\})")));
  CHECK(std::stoll(m[1].str()) == signal.lead_s);
  // The step runs in the background so that the trap runs while it does, under PMIx, and the cap exists.
  CHECK(std::regex_search(text, std::regex(R"(srun --mpi=pmix "\$MAMBAMT_BIN" sweep "\$GRID" "\$@" &)")));
  CHECK(text.find("SLURM_RESTART_COUNT:-0}\" -gt \"$MAX_RESTARTS\"") != std::string::npos);
  // Cluster-specific settings are there, commented out.
  for (const char* setting : {"##SBATCH --partition=gpu", "##SBATCH --qos=gpu", "##SBATCH --gres=gpu:4",
                              "##SBATCH --account="})
    CHECK(text.find(setting) != std::string::npos);
}

TEST_CASE("ablation_grid.sge asks for notification and a soft limit under the hard one") {
  const std::string text = read_text(source_dir() + "/jobs/ablation_grid.sge");
  const auto ds = parse_directives(text, "#$");
  bool notify = false;
  std::string h_rt, s_rt, h_vmem;
  for (const auto& d : ds) {
    notify = notify || d.option == "-notify";
    if (d.option == "-l" && d.value.rfind("h_rt=", 0) == 0) h_rt = d.value.substr(5);
    if (d.option == "-l" && d.value.rfind("s_rt=", 0) == 0) s_rt = d.value.substr(5);
    if (d.option == "-l" && d.value.rfind("h_vmem=", 0) == 0) h_vmem = d.value.substr(7);
  }
  CHECK(notify);
  CHECK_FALSE(h_vmem.empty());
  REQUIRE_FALSE(h_rt.empty());
  REQUIRE_FALSE(s_rt.empty());
  auto seconds = [](const std::string& hms) {
    int h = 0, m = 0, s = 0;
    std::sscanf(hms.c_str(), "%d:%d:%d", &h, &m, &s);
    return h * 3600 + m * 60 + s;
  };
  CHECK(seconds(s_rt) < seconds(h_rt));
  for (const char* needle : {"trap 'forward USR1' USR1", "trap 'forward USR2' USR2", "exit 99", "NSLOTS",
                             "SGE_HGR_gpu", "SGE_TASK_ID", "##$ -pe "})
    CHECK(text.find(needle) != std::string::npos);
}

TEST_CASE("the generated slurm.conf matches its saved copy") {
  // Machine-specific values fixed to placeholders; the [slurm] tests compare the
  // running cluster's file with the same copy, its real values put back.
  const auto r = run_shell(
      "MAMBAMT_SLURM_NODE=@NODE@ MAMBAMT_SLURM_HW=@HW@ MAMBAMT_SLURM_DEF_MEM=@DEF_MEM@ MAMBAMT_SLURM_MPI=@MPI@ " +
      source_dir() + "/slurm/cluster/gen_conf.sh @DIR@ @CTLD_PORT@ @SLURMD_PORT@ @RUNTIME@");
  REQUIRE(r.code == 0);
  CHECK(r.output == read_text(source_dir() + "/tests/slurm/data/slurm.conf.expected"));
  CHECK(run_shell(source_dir() + "/slurm/cluster/gen_conf.sh only-a-dir").code == 2);
}
