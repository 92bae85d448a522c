#include "core/autocast.h"

#include <ATen/autocast_mode.h>
#include <torch/version.h>

// LibTorch 2.4 replaced the per-device calls (set_cpu_enabled,
// set_autocast_gpu_dtype, ...) with ones that take the device type.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
#define MAMBAMT_AUTOCAST_BY_DEVICE 1
#endif

namespace mambamt::core {

bool begin_bf16_autocast(c10::DeviceType device) {
#ifdef MAMBAMT_AUTOCAST_BY_DEVICE
  const bool was = at::autocast::is_autocast_enabled(device);
  at::autocast::set_autocast_enabled(device, true);
  at::autocast::set_autocast_dtype(device, at::kBFloat16);
#else
  const bool cpu = device == c10::DeviceType::CPU;
  const bool was = cpu ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled();
  if (cpu) {
    at::autocast::set_cpu_enabled(true);
    at::autocast::set_autocast_cpu_dtype(at::kBFloat16);
  } else {
    at::autocast::set_enabled(true);
    at::autocast::set_autocast_gpu_dtype(at::kBFloat16);
  }
#endif
  at::autocast::increment_nesting();
  return was;
}

void end_bf16_autocast(c10::DeviceType device, bool was_enabled) {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
#ifdef MAMBAMT_AUTOCAST_BY_DEVICE
  at::autocast::set_autocast_enabled(device, was_enabled);
#else
  if (device == c10::DeviceType::CPU)
    at::autocast::set_cpu_enabled(was_enabled);
  else
    at::autocast::set_enabled(was_enabled);
#endif
}

// The cache is dropped when autocast's nesting count returns to 0: the keeper
// counts as one more level.
AutocastCacheKeeper::AutocastCacheKeeper() { at::autocast::increment_nesting(); }

AutocastCacheKeeper::~AutocastCacheKeeper() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

}  // namespace mambamt::core
