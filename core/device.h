#pragma once
// Device selection and a description of the machine for stores and --version.
#include <torch/torch.h>

#include <map>
#include <string>

namespace mambamt::core {

// "auto": the GPU of this process's local rank (local_rank modulo the visible
// GPUs) when LibTorch sees one, else the CPU. "cuda" without a GPU is an error.
torch::Device select_device(const std::string& preference, int local_rank = 0);

// Sets LibTorch's intra-op threads: `threads` if > 0; else OMP_NUM_THREADS when
// it is set (what the job scripts export from SLURM_CPUS_PER_TASK, and the test
// environment sets to 1); else the cores this process may run on divided by
// `ranks_on_node` (at least 1). Returns the count. An OMP_NUM_THREADS that is not
// a positive integer (or an OpenMP list such as "4,2", whose first entry counts)
// is an InputError naming it.
int configure_threads(int threads, int ranks_on_node = 1);

// Host, CPU model, cores, threads, LibTorch version, CUDA availability, device
// name and git revision: the store's /system attributes.
std::map<std::string, std::string> system_info(const torch::Device& device);

// Was LibTorch built with CUDA, and is a GPU visible?
bool torch_has_cuda();
int cuda_device_count();

}  // namespace mambamt::core
