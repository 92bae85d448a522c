#pragma once
// The job environment: who started this process and what it was given, read
// from the variables the launchers set.
//
//   Slurm (sbatch/srun)   SLURM_JOB_ID, SLURM_PROCID, SLURM_LOCALID, SLURM_NODEID,
//                         SLURM_STEP_NUM_TASKS / SLURM_NTASKS, SLURM_STEP_TASKS_PER_NODE,
//                         SLURM_ARRAY_JOB_ID, SLURM_ARRAY_TASK_ID, SLURM_RESTART_COUNT,
//                         SLURM_JOB_END_TIME (Slurm >= 23.02; 22.05 does not set it),
//                         SLURM_STEP_GPUS, SLURM_JOB_GPUS, SLURMD_NODENAME
//   OpenMPI's mpirun      OMPI_COMM_WORLD_{RANK,SIZE,LOCAL_RANK,LOCAL_SIZE,NODE_RANK}
//   any PMIx launcher     PMIX_RANK (srun --mpi=pmix sets it next to SLURM_PROCID)
//   Grid Engine           JOB_ID, NSLOTS, SGE_TASK_ID ("undefined" outside arrays),
//                         SGE_HGR_gpu, PE_HOSTFILE, RESTARTED
//   CUDA                  CUDA_VISIBLE_DEVICES
//
// Precedence for ranks: mpirun's OMPI_COMM_WORLD_* (mpirun inside a Slurm
// allocation starts its daemons with srun, so the ranks inherit the daemon's
// SLURM_PROCID, which is a node index, not a rank), then SLURM_*, then PMIX_RANK.
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mambamt::slurm {

// Looks a variable up; nullopt when unset. Tests pass a map instead of the process environment.
using Getenv = std::function<std::optional<std::string>(const std::string&)>;
Getenv process_getenv();
Getenv map_getenv(std::map<std::string, std::string> vars);

// Who started the process (which variables the ranks came from).
enum class Launcher { none, slurm, mpirun, pmix, grid_engine };
std::string to_string(Launcher launcher);

// Batch system that owns the job (independent of the launcher: mpirun under Grid Engine is
// launcher mpirun, scheduler grid_engine).
enum class Scheduler { none, slurm, grid_engine };
std::string to_string(Scheduler scheduler);

struct JobEnv {
  Launcher launcher = Launcher::none;
  Scheduler scheduler = Scheduler::none;

  int rank = 0;        // global rank of this process
  int world_size = 1;  // processes in the job step / MPI world (0: unknown, a bare PMIx launch)
  int local_rank = 0;  // rank among the processes on this node
  int local_size = 1;  // processes on this node
  int node_index = 0;  // index of this node in the step (SLURM_NODEID, OMPI_COMM_WORLD_NODE_RANK is not it)
  int num_nodes = 1;
  std::string node;  // this node's name (SLURMD_NODENAME, else the host name)

  std::string job_id;        // the scheduler's id of this job ("" outside a job); for Slurm arrays the task's own id
  std::string array_job_id;  // SLURM_ARRAY_JOB_ID / JOB_ID of an SGE array ("" if not an array)
  std::optional<int> array_task_id;
  int restart_count = 0;  // SLURM_RESTART_COUNT (0 on the first run); SGE: RESTARTED (0 or 1)

  // Unix seconds at which the scheduler ends the job, when the environment says
  // (SLURM_JOB_END_TIME). Slurm 22.05 does not; see requeue.h query_job_end_time().
  std::optional<int64_t> end_time;
  std::optional<int64_t> start_time;  // SLURM_JOB_START_TIME when set

  // GPUs the scheduler gave this node's job step, as it names them (physical
  // indices "0","2" or SGE names): SLURM_STEP_GPUS, else SLURM_JOB_GPUS, else SGE_HGR_gpu.
  std::vector<std::string> gpus;
  // CUDA_VISIBLE_DEVICES split at commas; nullopt when unset (every GPU visible).
  std::optional<std::vector<std::string>> cuda_visible_devices;

  std::string submit_dir;  // SLURM_SUBMIT_DIR / SGE_O_WORKDIR

  bool in_job() const { return !job_id.empty(); }
  bool is_coordinator() const { return rank == 0; }
  // One line for logs: "slurm job 123 (array 120_3, restart 1) rank 2/8 local 0/4 on node07 gpus 0,1,2,3".
  std::string describe() const;
};

// Reads the environment (throws InputError for a variable that is set but malformed,
// naming it: e.g. "SLURM_PROCID='x': not an integer").
JobEnv read_job_env(const Getenv& getenv);
JobEnv read_job_env();

// The number of ranks the launcher promised to start, for the orchestrator's
// start-up check: if MPI_Comm_size differs, MPI was started without the
// launcher's process management (srun without --mpi=pmix, a build against an
// MPI that Slurm's PMI cannot serve) and every process would run its own
// one-rank sweep. 0 when no launcher says (a plain process, Grid Engine's
// NSLOTS counts slots, not ranks).
//   OMPI_COMM_WORLD_SIZE (mpirun), else SLURM_STEP_NUM_TASKS (inside an srun
//   step), else SLURM_NTASKS / SLURM_NPROCS (the batch script itself).
int launcher_promised_ranks(const Getenv& getenv);
int launcher_promised_ranks();
// Throws Error with the advice above when `mpi_world_size` != a nonzero promise.
void check_world_size(int mpi_world_size, const Getenv& getenv);

// Which CUDA device index (as this process sees them, after CUDA_VISIBLE_DEVICES
// renumbering) the process with `env.local_rank` uses:
//   CUDA_VISIBLE_DEVICES lists k devices  -> local_rank % k (k == 1: each task got its own)
//   unset, scheduler GPUs g_0..g_{n-1}     -> the physical index of g_{local_rank % n}
//                                            (all devices are visible, so physical = CUDA index)
//   nothing known                          -> local_rank % device_count
// nullopt when no GPU is visible (CUDA_VISIBLE_DEVICES empty or "-1"/"NoDevFiles", or
// device_count == 0 with nothing else known).
std::optional<int> visible_gpu_index(const JobEnv& env, int device_count);
// The scheduler's name of that GPU for logs ("2" when CUDA_VISIBLE_DEVICES=2,3 and
// local rank 0 got index 0); "" when unknown.
std::string physical_gpu_name(const JobEnv& env, int device_count);

// "2(x3),1" -> {2,2,2,1} (SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE).
std::vector<int> parse_tasks_per_node(const std::string& text);
// "0,2-3" -> {"0","2","3"}; SGE's "0 1" and "gpu0 gpu1" -> {"0","1"}.
std::vector<std::string> parse_gpu_list(const std::string& text);

// One line of Grid Engine's PE_HOSTFILE: "node07.cluster 4 gpu.q@node07 UNDEFINED".
struct PeHost {
  std::string host;
  int slots = 0;
};
// Reads PE_HOSTFILE; throws InputError naming file and line for a malformed line.
std::vector<PeHost> read_pe_hostfile(const std::string& path);

}  // namespace mambamt::slurm
