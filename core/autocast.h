#pragma once
// bf16 autocast regions: matrix products and the other ops LibTorch lists for
// lower precision run in bf16 while parameters stay float32. Training and
// evaluation on a GPU use them (train::AutocastGuard); the tests also on the CPU.
#include <c10/core/DeviceType.h>

namespace mambamt::core {

// Turns bf16 autocast on for `device` (CPU or CUDA) and enters an autocast
// region. Returns whether autocast was on before, for end_bf16_autocast.
bool begin_bf16_autocast(c10::DeviceType device);

// Leaves the region begun by begin_bf16_autocast and restores `was_enabled`;
// leaving the outermost region drops the cached bf16 copies of the weights.
void end_bf16_autocast(c10::DeviceType device, bool was_enabled);

// One region for the guard's lifetime.
class Bf16Autocast {
 public:
  explicit Bf16Autocast(c10::DeviceType device) : device_(device), was_enabled_(begin_bf16_autocast(device)) {}
  ~Bf16Autocast() { end_bf16_autocast(device_, was_enabled_); }
  Bf16Autocast(const Bf16Autocast&) = delete;
  Bf16Autocast& operator=(const Bf16Autocast&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
};

// Keeps autocast's cached bf16 copies of the weights alive while it lives: an
// outermost region (Bf16Autocast) that ends meanwhile leaves them, and the
// keeper drops them when it goes, if no region is open then. For what holds
// on to those copies beyond a region's code: a CUDA graph recorded under
// autocast reads them at every replay (models/graph.h).
class AutocastCacheKeeper {
 public:
  AutocastCacheKeeper();
  ~AutocastCacheKeeper();
  AutocastCacheKeeper(const AutocastCacheKeeper&) = delete;
  AutocastCacheKeeper& operator=(const AutocastCacheKeeper&) = delete;
};

}  // namespace mambamt::core
