// The job environment read from fake launcher environments: Slurm batch
// script and srun step, mpirun (inside and outside Slurm), srun --mpi=pmix,
// Grid Engine, GPU renumbering.
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include "core/error.h"
#include "slurm/env.h"
#include "test_util.h"

using namespace mambamt::slurm;
using Vars = std::map<std::string, std::string>;

namespace {

// Sets variables for one test and restores the old values; also hides every
// launcher variable of the real environment (the tests may run inside a job).
class EnvGuard {
 public:
  explicit EnvGuard(const Vars& vars) {
    for (char** e = environ; *e; ++e) {
      std::string kv = *e;
      std::string name = kv.substr(0, kv.find('='));
      for (const char* p : {"SLURM_", "SLURMD_", "OMPI_", "PMIX_", "SGE_", "PE_HOSTFILE", "JOB_ID", "NSLOTS",
                            "CUDA_VISIBLE_DEVICES", "RESTARTED"})
        if (name.rfind(p, 0) == 0) hidden_.emplace(name, kv.substr(kv.find('=') + 1));
    }
    for (const auto& [name, value] : hidden_) ::unsetenv(name.c_str());
    for (const auto& [name, value] : vars) {
      set_.push_back(name);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~EnvGuard() {
    for (const auto& name : set_) ::unsetenv(name.c_str());
    for (const auto& [name, value] : hidden_) ::setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::map<std::string, std::string> hidden_;
  std::vector<std::string> set_;
};

std::string host() {
  char buf[256] = {0};
  ::gethostname(buf, sizeof buf - 1);
  return buf;
}

JobEnv read(const Vars& vars) { return read_job_env(map_getenv(vars)); }

}  // namespace

TEST_CASE("outside any job: one process, rank 0") {
  EnvGuard guard({});
  const JobEnv env = read_job_env();
  CHECK(env.launcher == Launcher::none);
  CHECK(env.scheduler == Scheduler::none);
  CHECK_FALSE(env.in_job());
  CHECK(env.rank == 0);
  CHECK(env.world_size == 1);
  CHECK(env.local_rank == 0);
  CHECK(env.restart_count == 0);
  CHECK(env.node == host());
  CHECK(env.gpus.empty());
  CHECK_FALSE(env.cuda_visible_devices);
  CHECK(launcher_promised_ranks() == 0);
  CHECK(env.describe().find("no batch job") != std::string::npos);
}

TEST_CASE("an srun step: rank, sizes, node, array, restart count (process environment)") {
  // As srun --mpi=pmix sets them for task 5 of 8 on the second of two nodes (4 per node).
  EnvGuard guard({{"SLURM_JOB_ID", "1234"},
                  {"SLURM_ARRAY_JOB_ID", "1230"},
                  {"SLURM_ARRAY_TASK_ID", "4"},
                  {"SLURM_RESTART_COUNT", "2"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_PROCID", "5"},
                  {"SLURM_LOCALID", "1"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_NTASKS", "8"},
                  {"SLURM_STEP_NUM_TASKS", "8"},
                  {"SLURM_STEP_NUM_NODES", "2"},
                  {"SLURM_STEP_TASKS_PER_NODE", "4(x2)"},
                  {"SLURMD_NODENAME", "gpu07"},
                  {"SLURM_SUBMIT_DIR", "/home/me/mambamt"},
                  {"PMIX_RANK", "5"},
                  {"SLURM_STEP_GPUS", "0,1,2,3"},
                  {"CUDA_VISIBLE_DEVICES", "0,1,2,3"}});
  const JobEnv env = read_job_env();
  CHECK(env.scheduler == Scheduler::slurm);
  CHECK(env.launcher == Launcher::slurm);
  CHECK(env.job_id == "1234");
  CHECK(env.array_job_id == "1230");
  CHECK(env.array_task_id == 4);
  CHECK(env.restart_count == 2);
  CHECK(env.rank == 5);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 1);
  CHECK(env.local_size == 4);
  CHECK(env.node_index == 1);
  CHECK(env.num_nodes == 2);
  CHECK(env.node == "gpu07");
  CHECK(env.submit_dir == "/home/me/mambamt");
  CHECK(env.gpus == std::vector<std::string>{"0", "1", "2", "3"});
  CHECK(visible_gpu_index(env, 4) == 1);
  CHECK_FALSE(env.is_coordinator());
  CHECK(launcher_promised_ranks() == 8);
  CHECK_FALSE(env.end_time);
  CHECK(env.describe() ==
        "slurm job 1234 (array 1230_4, restart 2) rank 5/8 local 1/4 on gpu07 (launcher slurm) gpus 0,1,2,3 "
        "CUDA_VISIBLE_DEVICES=0,1,2,3");
}

TEST_CASE("the batch script itself is one process whatever --ntasks says") {
  const Vars vars{{"SLURM_JOB_ID", "77"},   {"SLURM_PROCID", "0"},         {"SLURM_LOCALID", "0"},
                  {"SLURM_NODEID", "0"},    {"SLURM_NTASKS", "4"},         {"SLURM_NPROCS", "4"},
                  {"SLURM_JOB_NUM_NODES", "2"}, {"SLURM_TASKS_PER_NODE", "2(x2)"}, {"SLURM_JOB_END_TIME", "1795239101"}};
  const JobEnv env = read(vars);
  CHECK(env.launcher == Launcher::slurm);
  CHECK(env.world_size == 1);
  CHECK(env.num_nodes == 2);
  CHECK(env.restart_count == 0);
  CHECK(env.end_time == 1795239101);
  CHECK(env.is_coordinator());
  // Running `mambamt sweep` here without srun would start 1 of the 4 promised ranks.
  CHECK(launcher_promised_ranks(map_getenv(vars)) == 4);
  CHECK_THROWS_WITH(check_world_size(1, map_getenv(vars)), Catch::Contains("srun --mpi=pmix"));
  CHECK_NOTHROW(check_world_size(4, map_getenv(vars)));
}

TEST_CASE("a bare srun without PMIx: every task is an MPI singleton, and the check says so") {
  const Vars vars{{"SLURM_JOB_ID", "9"},         {"SLURM_STEP_ID", "0"},       {"SLURM_PROCID", "2"},
                  {"SLURM_STEP_NUM_TASKS", "4"}, {"SLURM_NTASKS", "4"},        {"SLURM_LOCALID", "2"},
                  {"SLURM_NODEID", "0"},         {"SLURM_STEP_TASKS_PER_NODE", "4"}};
  CHECK(launcher_promised_ranks(map_getenv(vars)) == 4);
  CHECK_THROWS_WITH(check_world_size(1, map_getenv(vars)),
                    Catch::Contains("the launcher started 4 tasks but MPI sees a world of 1"));
}

TEST_CASE("mpirun's variables win over the Slurm allocation's") {
  // mpirun inside an sbatch allocation: its daemons were started by srun, so
  // SLURM_PROCID is the daemon's node index, not the rank.
  const Vars vars{{"SLURM_JOB_ID", "55"},
                  {"SLURM_PROCID", "1"},
                  {"SLURM_NODEID", "1"},
                  {"SLURM_JOB_NUM_NODES", "2"},
                  {"SLURM_NTASKS", "2"},
                  {"SLURM_STEP_ID", "0"},
                  {"SLURM_STEP_NUM_TASKS", "2"},
                  {"OMPI_COMM_WORLD_RANK", "6"},
                  {"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"},
                  {"PMIX_RANK", "6"}};
  const JobEnv env = read(vars);
  CHECK(env.launcher == Launcher::mpirun);
  CHECK(env.scheduler == Scheduler::slurm);
  CHECK(env.rank == 6);
  CHECK(env.world_size == 8);
  CHECK(env.local_rank == 2);
  CHECK(env.local_size == 4);
  CHECK(env.node_index == 1);
  CHECK(env.num_nodes == 2);
  CHECK(launcher_promised_ranks(map_getenv(vars)) == 8);
}

TEST_CASE("mpirun outside a batch system") {
  const Vars vars{{"OMPI_COMM_WORLD_RANK", "1"},
                  {"OMPI_COMM_WORLD_SIZE", "2"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}};
  const JobEnv env = read(vars);
  CHECK(env.launcher == Launcher::mpirun);
  CHECK(env.scheduler == Scheduler::none);
  CHECK_FALSE(env.in_job());
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(launcher_promised_ranks(map_getenv(vars)) == 2);
}

TEST_CASE("a bare PMIx launch gives the rank but not the size") {
  const JobEnv env = read({{"PMIX_RANK", "3"}});
  CHECK(env.launcher == Launcher::pmix);
  CHECK(env.rank == 3);
  CHECK(env.world_size == 0);
  CHECK(launcher_promised_ranks(map_getenv({{"PMIX_RANK", "3"}})) == 0);
}

TEST_CASE("Grid Engine: job id, array task, slots, GPUs, PE_HOSTFILE") {
  TempDir tmp;
  const std::string host = ::host();
  write_text(tmp.path("pe_hostfile"), "node01.cluster 4 gpu.q@node01 UNDEFINED\n" + host +
                                          ".cluster 4 gpu.q@" + host + " UNDEFINED\n");
  const Vars vars{{"JOB_ID", "4242"},         {"SGE_TASK_ID", "3"},        {"NSLOTS", "8"},
                  {"SGE_HGR_gpu", "gpu0 gpu1"}, {"PE_HOSTFILE", tmp.path("pe_hostfile")},
                  {"SGE_O_WORKDIR", "/exports/me"}, {"RESTARTED", "1"},
                  {"OMPI_COMM_WORLD_RANK", "5"}, {"OMPI_COMM_WORLD_SIZE", "8"},
                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}};
  const JobEnv env = read(vars);
  CHECK(env.scheduler == Scheduler::grid_engine);
  CHECK(env.launcher == Launcher::mpirun);
  CHECK(env.job_id == "4242");
  CHECK(env.array_job_id == "4242");
  CHECK(env.array_task_id == 3);
  CHECK(env.restart_count == 1);
  CHECK(env.submit_dir == "/exports/me");
  CHECK(env.gpus == std::vector<std::string>{"0", "1"});
  CHECK(env.num_nodes == 2);
  CHECK(env.node_index == 1);
  CHECK(env.rank == 5);
  // No CUDA_VISIBLE_DEVICES: the scheduler's GPU of this local rank, physical numbering.
  CHECK(visible_gpu_index(env, 8) == 1);
  // NSLOTS counts slots, not ranks: no promise outside mpirun.
  CHECK(launcher_promised_ranks(map_getenv({{"JOB_ID", "4242"}, {"NSLOTS", "8"}})) == 0);

  // Not an array job: SGE_TASK_ID is the word "undefined".
  const JobEnv single = read({{"JOB_ID", "17"}, {"SGE_TASK_ID", "undefined"}, {"NSLOTS", "1"}});
  CHECK(single.scheduler == Scheduler::grid_engine);
  CHECK(single.launcher == Launcher::grid_engine);
  CHECK(single.array_job_id.empty());
  CHECK_FALSE(single.array_task_id);
  // JOB_ID alone (a common name) does not mean Grid Engine.
  CHECK(read({{"JOB_ID", "17"}}).scheduler == Scheduler::none);
}

TEST_CASE("PE_HOSTFILE errors name the file and line") {
  TempDir tmp;
  write_text(tmp.path("pe"), "node01 4 q@node01 UNDEFINED\nnode02 four q@node02 UNDEFINED\n");
  CHECK_THROWS_WITH(read_pe_hostfile(tmp.path("pe")), Catch::Contains(tmp.path("pe") + ":2"));
  write_text(tmp.path("ok"), "a 2 q UNDEFINED\n\nb 1 q UNDEFINED\n");
  const auto hosts = read_pe_hostfile(tmp.path("ok"));
  REQUIRE(hosts.size() == 2);
  CHECK(hosts[1].host == "b");
  CHECK(hosts[1].slots == 1);
}

TEST_CASE("GPU renumbering: the CUDA index of each local rank") {
  auto env_with = [](int local_rank, std::optional<std::string> cvd, std::string step_gpus) {
    Vars v{{"SLURM_JOB_ID", "1"}, {"SLURM_STEP_ID", "0"}, {"SLURM_LOCALID", std::to_string(local_rank)},
           {"SLURM_STEP_TASKS_PER_NODE", "4"}};
    if (cvd) v["CUDA_VISIBLE_DEVICES"] = *cvd;
    if (!step_gpus.empty()) v["SLURM_STEP_GPUS"] = step_gpus;
    return read(v);
  };
  // Every task sees the node's 4 GPUs (--gres=gpu:4, no per-task binding): rank r takes device r.
  for (int r = 0; r < 4; ++r) CHECK(visible_gpu_index(env_with(r, "4,5,6,7", "4,5,6,7"), 8) == r);
  CHECK(physical_gpu_name(env_with(2, "4,5,6,7", "4,5,6,7"), 8) == "6");
  // --gpus-per-task=1 / --gpu-bind=single:1: each task sees one device, always index 0.
  for (int r = 0; r < 4; ++r) CHECK(visible_gpu_index(env_with(r, std::to_string(4 + r), "4,5,6,7"), 8) == 0);
  CHECK(physical_gpu_name(env_with(3, "7", "4,5,6,7"), 8) == "7");
  // Two GPUs for four ranks: two ranks share each.
  CHECK(visible_gpu_index(env_with(3, "2,3", ""), 8) == 1);
  // No CUDA_VISIBLE_DEVICES, the scheduler names physical GPUs 2 and 3: all devices are visible.
  CHECK(visible_gpu_index(env_with(1, std::nullopt, "2-3"), 8) == 3);
  // Nothing known: local rank modulo the devices the driver reports.
  CHECK(visible_gpu_index(env_with(3, std::nullopt, ""), 2) == 1);
  CHECK_FALSE(visible_gpu_index(env_with(0, std::nullopt, ""), 0));
  // Devices hidden on purpose.
  CHECK_FALSE(visible_gpu_index(env_with(0, "", ""), 8));
  CHECK_FALSE(visible_gpu_index(env_with(0, "-1", ""), 8));
  CHECK_FALSE(visible_gpu_index(env_with(0, "NoDevFiles", ""), 8));
  // UUIDs are counted, not parsed.
  CHECK(visible_gpu_index(env_with(1, "GPU-8f2e1c3a-0000-1111,GPU-77aa0000-2222-3333", ""), 8) == 1);
  // SLURM_JOB_GPUS when the step has none of its own.
  CHECK(read({{"SLURM_JOB_ID", "1"}, {"SLURM_JOB_GPUS", "1,3"}}).gpus == std::vector<std::string>{"1", "3"});
}

TEST_CASE("Slurm's compressed lists") {
  CHECK(parse_tasks_per_node("4") == std::vector<int>{4});
  CHECK(parse_tasks_per_node("2(x3),1") == std::vector<int>{2, 2, 2, 1});
  CHECK(parse_tasks_per_node("") == std::vector<int>{});
  CHECK_THROWS_AS(parse_tasks_per_node("2(y3)"), mambamt::InputError);
  CHECK(parse_gpu_list("0,2-4") == std::vector<std::string>{"0", "2", "3", "4"});
  CHECK(parse_gpu_list("0 1") == std::vector<std::string>{"0", "1"});
  CHECK(parse_gpu_list("cuda0 cuda1") == std::vector<std::string>{"0", "1"});
  CHECK(parse_gpu_list("MIG-GPU-abc/1/2") == std::vector<std::string>{"MIG-GPU-abc/1/2"});
  CHECK(parse_gpu_list("") == std::vector<std::string>{});
}

TEST_CASE("a malformed launcher variable is an error that names it") {
  CHECK_THROWS_WITH(read({{"SLURM_JOB_ID", "1"}, {"SLURM_PROCID", "x"}}), Catch::Contains("SLURM_PROCID='x'"));
  CHECK_THROWS_WITH(read({{"OMPI_COMM_WORLD_RANK", "1.5"}}), Catch::Contains("OMPI_COMM_WORLD_RANK"));
  CHECK_THROWS_AS(read({{"SLURM_JOB_ID", "1"}, {"SLURM_RESTART_COUNT", "two"}}), mambamt::InputError);
}
