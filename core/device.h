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

// OpenBLAS (Debian's libopenblas0-openmp, which LibTorch's CPU build calls
// for matrix products) picks its kernels from the CPU model when it loads. A
// CPU newer than the library (Debian 12's OpenBLAS 0.3.21 on a model-207
// Xeon) gets its generic SSE3 kernels, "Prescott": a 1024 x 1024 sgemm on 2
// threads ran at 33 GFLOP/s there, at 175-222 GFLOP/s with the SkylakeX
// kernels. When OpenBLAS reports Prescott, OPENBLAS_CORETYPE is unset and the
// CPU has AVX-512 (F, CD, BW, DQ, VL) or AVX2 and FMA, this sets
// OPENBLAS_CORETYPE to SkylakeX or Haswell and executes the program again
// (/proc/self/exe with the same arguments and environment, the same pid):
// OpenBLAS reads the variable only when it loads. Call it first in main(),
// before anything is printed or started. Otherwise, and if the exec fails, it
// returns and nothing changes. A BLAS other than OpenBLAS (MKL in PyTorch's
// LibTorch) is left alone.
void ensure_blas_kernels(char** argv);

// The OpenBLAS core in use ("SkylakeX", "Prescott", ...), "" when the BLAS is
// not OpenBLAS.
std::string blas_core();

// Was LibTorch built with CUDA, and is a GPU visible?
bool torch_has_cuda();
int cuda_device_count();

}  // namespace mambamt::core
