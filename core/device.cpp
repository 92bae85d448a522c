#include "core/device.h"

#include <dlfcn.h>
#include <sched.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>

#include "core/allocator.h"
#include "core/error.h"
#include "core/fs.h"
#include "core/version.h"

#ifdef MAMBAMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace mambamt::core {

std::string blas_core() {
  // Looked up at run time: the symbol exists only in OpenBLAS.
  using CoreName = char* (*)();
  auto fn = reinterpret_cast<CoreName>(::dlsym(RTLD_DEFAULT, "openblas_get_corename"));
  const char* name = fn ? fn() : nullptr;
  return name ? name : "";
}

void ensure_blas_kernels(char** argv) {
#if defined(__x86_64__)
  if (std::getenv("OPENBLAS_CORETYPE") || blas_core() != "Prescott") return;
  const char* core = nullptr;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
      __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl"))
    core = "SkylakeX";
  else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    core = "Haswell";
  if (!core) return;
  ::setenv("OPENBLAS_CORETYPE", core, 1);
  ::execv("/proc/self/exe", argv);
  ::unsetenv("OPENBLAS_CORETYPE");  // the exec failed: go on as before
#else
  (void)argv;
#endif
}

bool torch_has_cuda() {
#ifdef MAMBAMT_WITH_CUDA
  return true;
#else
  return false;
#endif
}

int cuda_device_count() { return torch::cuda::is_available() ? static_cast<int>(torch::cuda::device_count()) : 0; }

torch::Device select_device(const std::string& preference, int local_rank) {
  int gpus = cuda_device_count();
  if (preference == "cpu") return torch::Device(torch::kCPU);
  if (preference == "cuda" || preference == "auto") {
    if (gpus > 0) return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
    if (preference == "cuda")
      throw InputError(std::string("device \"cuda\" asked for (train.device or --device) but no GPU is visible") +
                       (torch_has_cuda() ? "" : " (this LibTorch is built without CUDA)"));
    return torch::Device(torch::kCPU);
  }
  throw InputError("unknown device \"" + preference + "\" (use auto, cpu or cuda)");
}

namespace {
// OMP_NUM_THREADS's first entry (OpenMP allows a list, one per nesting level),
// or 0 when the variable is unset or empty.
int omp_num_threads_from_env() {
  const char* env = std::getenv("OMP_NUM_THREADS");
  if (env == nullptr || *env == '\0') return 0;
  const std::string value(env);
  const std::string first = value.substr(0, value.find(','));
  const bool digits = !first.empty() && first.size() <= 6 && first.find_first_not_of("0123456789") == std::string::npos;
  const int n = digits ? std::stoi(first) : 0;
  if (n <= 0)
    throw InputError("OMP_NUM_THREADS=\"" + value + "\" is not a positive thread count (train.threads = 0 "
                     "takes the count from it; unset it or set train.threads)");
  return n;
}
}  // namespace

int configure_threads(int threads, int ranks_on_node) {
  if (threads <= 0) threads = omp_num_threads_from_env();
  if (threads <= 0) {
    cpu_set_t set;
    int cores = 1;
    if (sched_getaffinity(0, sizeof set, &set) == 0) cores = CPU_COUNT(&set);
    threads = std::max(1, cores / std::max(1, ranks_on_node));
  }
  torch::set_num_threads(threads);
  return threads;
}

namespace {
std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      auto p = line.find(':');
      if (p != std::string::npos) return line.substr(p + 2);
    }
  return "unknown";
}
}  // namespace

std::map<std::string, std::string> system_info(const torch::Device& device) {
  std::map<std::string, std::string> info;
  info["host"] = host_name();
  info["cpu"] = cpu_model();
  info["cores"] = std::to_string(::sysconf(_SC_NPROCESSORS_ONLN));
  info["threads"] = std::to_string(torch::get_num_threads());
  info["torch"] = TORCH_VERSION;
  info["torch_cuda"] = torch_has_cuda() ? "yes" : "no";
  const std::string blas = blas_core();
  info["blas"] = blas.empty() ? "not OpenBLAS" : "OpenBLAS " + blas;
  info["allocator"] = allocator_name();
  info["gpus"] = std::to_string(cuda_device_count());
  info["device"] = device.str();
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda()) info["gpu"] = at::cuda::getDeviceProperties(device.has_index() ? device.index() : 0)->name;
#endif
  info["mambamt_version"] = version();
  info["git_revision"] = git_revision();
  return info;
}

}  // namespace mambamt::core
