#include "slurm/env.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "slurm/detail/text.h"

namespace mambamt::slurm {
namespace {

using detail::trim;

int64_t parse_int(const std::string& name, const std::string& value) {
  const std::string v = trim(value);
  size_t pos = 0;
  long long x = 0;
  try {
    x = std::stoll(v, &pos);
  } catch (const std::exception&) {
    pos = std::string::npos;
  }
  if (v.empty() || pos != v.size()) throw InputError(name + "='" + value + "': not an integer");
  return x;
}

std::optional<int64_t> get_int(const Getenv& env, const std::string& name) {
  auto v = env(name);
  if (!v || trim(*v).empty()) return std::nullopt;
  return parse_int(name, *v);
}

std::optional<std::string> get_nonempty(const Getenv& env, const std::string& name) {
  auto v = env(name);
  if (!v || v->empty()) return std::nullopt;
  return v;
}

// First variable of `names` that is set.
std::optional<int64_t> first_int(const Getenv& env, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (auto v = get_int(env, n)) return v;
  return std::nullopt;
}

std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream in(text);
  while (std::getline(in, cur, sep)) out.push_back(trim(cur));
  return out;
}

void read_grid_engine_hosts(const Getenv& env, JobEnv& job) {
  auto path = get_nonempty(env, "PE_HOSTFILE");
  if (!path) return;
  std::ifstream probe(*path);
  if (!probe) return;  // the file lives on the master node only; ranks elsewhere cannot read it
  const auto hosts = read_pe_hostfile(*path);
  if (hosts.empty()) return;
  job.num_nodes = static_cast<int>(hosts.size());
  // Host names in the file may be fully qualified while the node name is short.
  const std::string short_node = job.node.substr(0, job.node.find('.'));
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].host.substr(0, hosts[i].host.find('.')) == short_node) {
      job.node_index = static_cast<int>(i);
      break;
    }
  }
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "localhost";
  return buf;
}

}  // namespace

Getenv process_getenv() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (!v) return std::nullopt;
    return std::string(v);
  };
}

Getenv map_getenv(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

std::string to_string(Launcher launcher) {
  switch (launcher) {
    case Launcher::none: return "none";
    case Launcher::slurm: return "slurm";
    case Launcher::mpirun: return "mpirun";
    case Launcher::pmix: return "pmix";
    case Launcher::grid_engine: return "grid_engine";
  }
  return "?";
}

std::string to_string(Scheduler scheduler) {
  switch (scheduler) {
    case Scheduler::none: return "none";
    case Scheduler::slurm: return "slurm";
    case Scheduler::grid_engine: return "grid_engine";
  }
  return "?";
}

std::vector<int> parse_tasks_per_node(const std::string& text) {
  std::vector<int> out;
  if (trim(text).empty()) return out;
  // Items are "N" or "N(xM)"; the commas inside are the only separators.
  for (const std::string& item : split(text, ',')) {
    const auto paren = item.find('(');
    const int n = static_cast<int>(parse_int("tasks per node '" + text + "'", item.substr(0, paren)));
    int repeat = 1;
    if (paren != std::string::npos) {
      const auto close = item.find(')', paren);
      if (close == std::string::npos || item.compare(paren, 2, "(x") != 0)
        throw InputError("tasks per node '" + text + "': expected N or N(xM) items");
      repeat = static_cast<int>(parse_int("tasks per node '" + text + "'", item.substr(paren + 2, close - paren - 2)));
    }
    for (int i = 0; i < repeat; ++i) out.push_back(n);
  }
  return out;
}

std::vector<std::string> parse_gpu_list(const std::string& text) {
  std::vector<std::string> out;
  std::string norm = text;
  for (char& c : norm)
    if (c == ' ' || c == '\t') c = ',';
  for (const std::string& item : split(norm, ',')) {
    if (item.empty()) continue;
    const auto dash = item.find('-');
    const bool numeric_range = dash != std::string::npos && dash > 0 &&
                               std::isdigit(static_cast<unsigned char>(item[0])) &&
                               item.find_first_not_of("0123456789-") == std::string::npos;
    if (numeric_range) {
      const int lo = static_cast<int>(parse_int("GPU list '" + text + "'", item.substr(0, dash)));
      const int hi = static_cast<int>(parse_int("GPU list '" + text + "'", item.substr(dash + 1)));
      for (int g = lo; g <= hi; ++g) out.push_back(std::to_string(g));
      continue;
    }
    // SGE sites name GPUs "gpu0"/"cuda1": keep the trailing index. UUIDs
    // ("GPU-3f2a...", "MIG-...") are kept whole.
    size_t digits = item.size();
    while (digits > 0 && std::isdigit(static_cast<unsigned char>(item[digits - 1]))) --digits;
    const std::string prefix = item.substr(0, digits);
    const bool named_index = digits < item.size() && !prefix.empty() &&
                             prefix.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ") == std::string::npos;
    out.push_back(named_index ? item.substr(digits) : item);
  }
  return out;
}

std::vector<PeHost> read_pe_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path + ": cannot read the Grid Engine PE_HOSTFILE");
  std::vector<PeHost> hosts;
  std::string line;
  long lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (trim(line).empty()) continue;
    std::istringstream fields(line);
    PeHost h;
    std::string slots;
    fields >> h.host >> slots;
    try {
      h.slots = static_cast<int>(parse_int("slots", slots));
    } catch (const InputError&) {
      throw InputError(located(path, lineno, 0, "expected 'host slots queue processors', got '" + line + "'"));
    }
    hosts.push_back(h);
  }
  return hosts;
}

JobEnv read_job_env(const Getenv& env) {
  JobEnv job;
  job.node = host_name();

  // --- the scheduler: job identity ---
  if (auto id = get_nonempty(env, "SLURM_JOB_ID")) {
    job.scheduler = Scheduler::slurm;
    job.job_id = *id;
    if (auto a = get_nonempty(env, "SLURM_ARRAY_JOB_ID")) job.array_job_id = *a;
    if (auto t = get_int(env, "SLURM_ARRAY_TASK_ID")) job.array_task_id = static_cast<int>(*t);
    job.restart_count = static_cast<int>(get_int(env, "SLURM_RESTART_COUNT").value_or(0));
    job.end_time = get_int(env, "SLURM_JOB_END_TIME");
    job.start_time = get_int(env, "SLURM_JOB_START_TIME");
    if (auto n = get_nonempty(env, "SLURMD_NODENAME")) job.node = *n;
    if (auto d = get_nonempty(env, "SLURM_SUBMIT_DIR")) job.submit_dir = *d;
    if (auto g = get_nonempty(env, "SLURM_STEP_GPUS")) {
      job.gpus = parse_gpu_list(*g);
    } else if (auto jg = get_nonempty(env, "SLURM_JOB_GPUS")) {
      job.gpus = parse_gpu_list(*jg);
    }
  } else if (auto id = get_nonempty(env, "JOB_ID"); id && (env("SGE_ROOT") || env("NSLOTS") || env("SGE_TASK_ID"))) {
    // JOB_ID alone is too common a name to mean Grid Engine.
    job.scheduler = Scheduler::grid_engine;
    job.job_id = *id;
    auto task = env("SGE_TASK_ID");
    if (task && *task != "undefined" && !task->empty()) {
      job.array_job_id = *id;
      job.array_task_id = static_cast<int>(parse_int("SGE_TASK_ID", *task));
    }
    job.restart_count = static_cast<int>(get_int(env, "RESTARTED").value_or(0));
    if (auto d = get_nonempty(env, "SGE_O_WORKDIR")) job.submit_dir = *d;
    if (auto g = get_nonempty(env, "SGE_HGR_gpu")) job.gpus = parse_gpu_list(*g);
  }
  if (auto cvd = env("CUDA_VISIBLE_DEVICES")) job.cuda_visible_devices = parse_gpu_list(*cvd);

  // --- the launcher: ranks ---
  if (auto r = get_int(env, "OMPI_COMM_WORLD_RANK")) {
    job.launcher = Launcher::mpirun;
    job.rank = static_cast<int>(*r);
    job.world_size = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_SIZE").value_or(1));
    job.local_rank = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_LOCAL_RANK").value_or(0));
    job.local_size = static_cast<int>(get_int(env, "OMPI_COMM_WORLD_LOCAL_SIZE").value_or(1));
    if (job.scheduler == Scheduler::slurm) {
      job.num_nodes = static_cast<int>(first_int(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}).value_or(1));
      job.node_index = static_cast<int>(get_int(env, "SLURM_NODEID").value_or(0));
    } else if (job.scheduler == Scheduler::grid_engine) {
      read_grid_engine_hosts(env, job);
    }
  } else if (job.scheduler == Scheduler::slurm) {
    job.launcher = Launcher::slurm;
    job.rank = static_cast<int>(get_int(env, "SLURM_PROCID").value_or(0));
    job.local_rank = static_cast<int>(get_int(env, "SLURM_LOCALID").value_or(0));
    job.node_index = static_cast<int>(get_int(env, "SLURM_NODEID").value_or(0));
    if (env("SLURM_STEP_ID")) {
      // Inside an srun step: the step's geometry.
      job.world_size = static_cast<int>(first_int(env, {"SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_NPROCS"}).value_or(1));
      job.num_nodes = static_cast<int>(first_int(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES"}).value_or(1));
      auto per_node = parse_tasks_per_node(
          env("SLURM_STEP_TASKS_PER_NODE").value_or(env("SLURM_TASKS_PER_NODE").value_or("")));
      if (job.node_index >= 0 && job.node_index < static_cast<int>(per_node.size())) job.local_size = per_node[job.node_index];
    } else {
      // The batch script itself is one process, whatever --ntasks says.
      job.world_size = 1;
      job.num_nodes = static_cast<int>(first_int(env, {"SLURM_JOB_NUM_NODES", "SLURM_NNODES"}).value_or(1));
    }
  } else if (auto r = get_int(env, "PMIX_RANK")) {
    job.launcher = Launcher::pmix;
    job.rank = static_cast<int>(*r);
    // PMIx keeps the sizes in its server, not in the environment.
    job.world_size = 0;
  } else if (job.scheduler == Scheduler::grid_engine) {
    job.launcher = Launcher::grid_engine;
    read_grid_engine_hosts(env, job);
  }
  return job;
}

JobEnv read_job_env() { return read_job_env(process_getenv()); }

int launcher_promised_ranks(const Getenv& env) {
  if (auto n = get_int(env, "OMPI_COMM_WORLD_SIZE")) return static_cast<int>(*n);
  if (!get_nonempty(env, "SLURM_JOB_ID")) return 0;
  if (env("SLURM_STEP_ID"))
    if (auto n = get_int(env, "SLURM_STEP_NUM_TASKS")) return static_cast<int>(*n);
  if (auto n = first_int(env, {"SLURM_NTASKS", "SLURM_NPROCS"})) return static_cast<int>(*n);
  return 0;
}

int launcher_promised_ranks() { return launcher_promised_ranks(process_getenv()); }

void check_world_size(int mpi_world_size, const Getenv& env) {
  const int promised = launcher_promised_ranks(env);
  if (promised == 0 || promised == mpi_world_size) return;
  std::ostringstream msg;
  msg << "the launcher started " << promised << " tasks but MPI sees a world of " << mpi_world_size
      << ": MPI was not started through the launcher's process management, so every task would run its own sweep. ";
  if (env("SLURM_JOB_ID"))
    msg << "Start the ranks with 'srun --mpi=pmix' (see 'srun --mpi=list'), not a bare srun, and use an MPI "
           "built with PMIx support (Debian's OpenMPI is).";
  else
    msg << "Start the ranks with the MPI's own mpirun.";
  throw Error(msg.str());
}

namespace {
bool no_device(const std::vector<std::string>& cvd) {
  return cvd.empty() || (cvd.size() == 1 && (cvd[0] == "-1" || cvd[0] == "NoDevFiles"));
}
}  // namespace

std::optional<int> visible_gpu_index(const JobEnv& env, int device_count) {
  const int local = std::max(env.local_rank, 0);
  if (env.cuda_visible_devices) {
    const auto& cvd = *env.cuda_visible_devices;
    if (no_device(cvd)) return std::nullopt;
    return local % static_cast<int>(cvd.size());
  }
  if (!env.gpus.empty()) {
    const std::string& g = env.gpus[local % env.gpus.size()];
    if (!g.empty() && g.find_first_not_of("0123456789") == std::string::npos) return std::stoi(g);
    // A UUID cannot be turned into an index without asking the driver.
    return local % static_cast<int>(env.gpus.size());
  }
  if (device_count <= 0) return std::nullopt;
  return local % device_count;
}

std::string physical_gpu_name(const JobEnv& env, int device_count) {
  const auto index = visible_gpu_index(env, device_count);
  if (!index) return "";
  if (env.cuda_visible_devices) return (*env.cuda_visible_devices)[*index];
  return std::to_string(*index);
}

std::string JobEnv::describe() const {
  std::ostringstream s;
  if (scheduler == Scheduler::none) {
    s << "no batch job";
  } else {
    s << to_string(scheduler) << " job " << job_id;
    if (!array_job_id.empty() || restart_count > 0) {
      s << " (";
      if (!array_job_id.empty()) s << "array " << array_job_id << "_" << array_task_id.value_or(-1);
      if (!array_job_id.empty() && restart_count > 0) s << ", ";
      if (restart_count > 0) s << "restart " << restart_count;
      s << ")";
    }
  }
  s << " rank " << rank << "/" << world_size << " local " << local_rank << "/" << local_size << " on " << node
    << " (launcher " << to_string(launcher) << ")";
  if (!gpus.empty()) {
    s << " gpus ";
    for (size_t i = 0; i < gpus.size(); ++i) s << (i ? "," : "") << gpus[i];
  }
  if (cuda_visible_devices) {
    s << " CUDA_VISIBLE_DEVICES=";
    for (size_t i = 0; i < cuda_visible_devices->size(); ++i) s << (i ? "," : "") << (*cuda_visible_devices)[i];
  }
  return s.str();
}

}  // namespace mambamt::slurm
