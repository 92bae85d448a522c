#pragma once
// Memory of this process: CPU resident set (current and peak, from
// /proc/self/status) and, on CUDA, the caching allocator's peak.
#include <torch/torch.h>

namespace mambamt::train {

// Current and peak resident set size of this process, MiB (0 where unknown).
double rss_mb();
double peak_rss_mb();
// Resets the peak resident set size to the current one (Linux clear_refs);
// false where the kernel does not allow it.
bool reset_peak_rss();

// Peak memory allocated on `device` since the last reset, MiB (0 on CPU or
// without CUDA), and its reset.
double cuda_peak_mb(const torch::Device& device);
void reset_cuda_peak(const torch::Device& device);

// Starts a peak measurement: on CPU returns the allocator's free pages to
// the system (core::release_free_memory) and resets the peak RSS, so neither
// pages kept from earlier work nor an earlier high-water mark count (a worker
// process runs several experiments, a benchmark several models); on CUDA
// resets the allocator's peak. Returns whether the peak can be read (false
// where the kernel does not allow resetting the CPU peak).
bool start_peak_measurement(const torch::Device& device);

// Hands the memory this process holds cached but unused back: on CUDA the
// caching allocator's free blocks (so that another process on the same GPU,
// such as comet-score, can have them), on CPU the allocator's free pages.
void release_cached_memory(const torch::Device& device);

// What the memory_mb metric reports: CUDA peak allocated on a GPU, CPU RSS otherwise.
double device_memory_mb(const torch::Device& device);

}  // namespace mambamt::train
