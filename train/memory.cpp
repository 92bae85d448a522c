#include "train/memory.h"

#include <fstream>
#include <string>

#include "core/allocator.h"

#ifdef MAMBAMT_WITH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace mambamt::train {

namespace {

// A "VmRSS:   1234 kB" line of /proc/self/status, in MiB.
double status_field_mb(const std::string& field) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(field + ":", 0) == 0) {
      try {
        return std::stod(line.substr(field.size() + 1)) / 1024.0;
      } catch (...) {
        return 0;
      }
    }
  }
  return 0;
}

}  // namespace

double rss_mb() { return status_field_mb("VmRSS"); }
double peak_rss_mb() { return status_field_mb("VmHWM"); }

bool reset_peak_rss() {
  std::ofstream out("/proc/self/clear_refs");
  if (!out) return false;
  out << "5";
  out.flush();
  return static_cast<bool>(out);
}

double cuda_peak_mb(const torch::Device& device) {
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda()) {
    // Index 0 of the stat arrays is the aggregate over pools in every version.
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index() < 0 ? 0 : device.index());
    return static_cast<double>(stats.allocated_bytes[0].peak) / (1024.0 * 1024.0);
  }
#endif
  return 0;
}

void reset_cuda_peak(const torch::Device& device) {
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.index() < 0 ? 0 : device.index());
#endif
}

bool start_peak_measurement(const torch::Device& device) {
  if (device.is_cuda()) {
    reset_cuda_peak(device);
    return true;
  }
  core::release_free_memory();
  return reset_peak_rss();
}

void release_cached_memory(const torch::Device& device) {
#ifdef MAMBAMT_WITH_CUDA
  if (device.is_cuda()) {
    c10::cuda::CUDACachingAllocator::emptyCache();
    return;
  }
#endif
  core::release_free_memory();
}

double device_memory_mb(const torch::Device& device) { return device.is_cuda() ? cuda_peak_mb(device) : rss_mb(); }

}  // namespace mambamt::train
