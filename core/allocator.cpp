#include "core/allocator.h"

#include <dlfcn.h>
#include <malloc.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace mambamt::core {

namespace {

using MallctlFn = int (*)(const char*, void*, size_t*, void*, size_t);

// jemalloc's control interface when jemalloc is the allocator that serves
// malloc (found by the object that defines malloc, not by whether some loaded
// library happens to export a mallctl), else nullptr.
// Looked up once: FreePagesBound::tick asks for it every training step.
MallctlFn jemalloc_ctl() {
  static const MallctlFn ctl = []() -> MallctlFn {
    Dl_info info{};
    void* malloc_address = reinterpret_cast<void*>(&::malloc);
    if (::dladdr(malloc_address, &info) == 0 || info.dli_fname == nullptr) return nullptr;
    if (std::strstr(info.dli_fname, "jemalloc") == nullptr) return nullptr;
    return reinterpret_cast<MallctlFn>(::dlsym(RTLD_DEFAULT, "mallctl"));
  }();
  return ctl;
}

}  // namespace

std::string allocator_name() {
  MallctlFn ctl = jemalloc_ctl();
  if (ctl == nullptr) return "glibc malloc";
  const char* version = nullptr;
  size_t size = sizeof(version);
  if (ctl("version", &version, &size, nullptr, 0) != 0 || version == nullptr) return "jemalloc";
  return std::string("jemalloc ") + version;
}

void release_free_memory() {
  if (MallctlFn ctl = jemalloc_ctl()) {
    // "arena.<MALLCTL_ARENAS_ALL>.purge": 4096 names every arena.
    ctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);
    return;
  }
  ::malloc_trim(0);
}

int64_t kept_free_bytes() {
  MallctlFn ctl = jemalloc_ctl();
  if (ctl == nullptr) return 0;
  uint64_t epoch = 1;
  size_t size = sizeof(epoch);
  if (ctl("epoch", &epoch, &size, &epoch, size) != 0) return 0;  // refreshes the statistics
  size_t dirty_pages = 0, page = 0;
  size = sizeof(dirty_pages);
  if (ctl("stats.arenas.4096.pdirty", &dirty_pages, &size, nullptr, 0) != 0) return 0;
  size = sizeof(page);
  if (ctl("arenas.page", &page, &size, nullptr, 0) != 0) return 0;
  return static_cast<int64_t>(dirty_pages * page);
}

bool FreePagesBound::tick() {
  const int64_t kept = kept_free_bytes();
  if (reference_ < 0) {
    reference_ = kept;
    return false;
  }
  if (kept <= 2 * reference_ + (int64_t(64) << 20)) return false;
  release_free_memory();
  reference_ = -1;
  return true;
}

}  // namespace mambamt::core
