// The programs' heap allocator (core/allocator.h, cmake/Allocator.cmake):
// jemalloc with core/jemalloc_conf.c's settings where the build linked it,
// freed pages kept for the next allocation, and handed back on request.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

#include "core/allocator.h"
#include "core/device.h"

using namespace mambamt::core;

namespace {

double rss_mib() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return -1;
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

// Allocates `bytes` with malloc, writes every page, frees it; returns the
// page faults that took.
long touch_and_free(size_t bytes) {
  const long before = minor_faults();
  void* block = std::malloc(bytes);
  REQUIRE(block != nullptr);
  char* p = static_cast<char*>(block);
  std::memset(p, 1, bytes);
  const long faults = minor_faults() - before;
  // Read a byte back so the compiler keeps the writes.
  const int middle = p[bytes / 2];
  CHECK(middle == 1);
  std::free(p);
  return faults;
}

}  // namespace

#ifdef MAMBAMT_JEMALLOC_LINKED
TEST_CASE("the programs run on jemalloc with mambamt's settings", "[core][allocator]") {
  const std::string name = allocator_name();
  INFO(name);
  CHECK(name.rfind("jemalloc ", 0) == 0);
  CHECK(system_info(torch::Device(torch::kCPU)).at("allocator") == name);  // stores record it
  using Ctl = int (*)(const char*, void*, size_t*, void*, size_t);
  auto ctl = reinterpret_cast<Ctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  REQUIRE(ctl != nullptr);
  // core/jemalloc_conf.c reached jemalloc (an environment MALLOC_CONF would override it).
  if (std::getenv("MALLOC_CONF") == nullptr) {
    ssize_t decay = 0;
    size_t size = sizeof(decay);
    REQUIRE(ctl("opt.dirty_decay_ms", &decay, &size, nullptr, 0) == 0);
    CHECK(decay == -1);
    size_t oversize = 1;
    size = sizeof(oversize);
    REQUIRE(ctl("opt.oversize_threshold", &oversize, &size, nullptr, 0) == 0);
    CHECK(oversize == 0);
  }
}

TEST_CASE("freed large blocks are reused without page faults until released", "[core][allocator]") {
  if (std::getenv("MALLOC_CONF") != nullptr) return;  // other settings than the ones under test
  const size_t bytes = size_t(256) << 20;  // 65536 pages of 4 KiB
  release_free_memory();
  const long first = touch_and_free(bytes);
  const double kept = rss_mib();
  const long second = touch_and_free(bytes);
  INFO("faults: first " << first << ", second " << second << "; RSS after free " << kept << " MiB");
  CHECK(first > 100);          // fresh pages: 65536 faults, or 128 with transparent huge pages
  CHECK(second * 20 < first);  // the freed pages again, already mapped
  // Released: the resident set drops by the block, and touching it again faults again.
  release_free_memory();
  const double released = rss_mib();
  INFO("RSS after release " << released << " MiB");
  CHECK(released < kept - 200);
  CHECK(touch_and_free(bytes) > first / 2);
}
TEST_CASE("a loop's kept free pages are handed back when they outgrow its first unit's", "[core][allocator]") {
  if (std::getenv("MALLOC_CONF") != nullptr) return;
  const size_t mib = size_t(1) << 20;
  release_free_memory();
  CHECK(kept_free_bytes() < int64_t(8 * mib));
  FreePagesBound bound;
  touch_and_free(64 * mib);
  CHECK_FALSE(bound.tick());  // the reference: the first unit's 64 MiB kept
  CHECK(kept_free_bytes() >= int64_t(60 * mib));
  // A steady loop: the same pages again, nothing handed back, no page faults.
  for (int i = 0; i < 4; ++i) {
    CHECK(touch_and_free(64 * mib) < 100);
    CHECK_FALSE(bound.tick());
  }
  // A unit that leaves far more than twice the reference kept: handed back.
  void* held = std::malloc(64 * mib);  // the kept 64 MiB serve this, so the next block is new
  REQUIRE(held != nullptr);
  touch_and_free(256 * mib);
  std::free(held);
  INFO("kept " << kept_free_bytes() / mib << " MiB");
  CHECK(bound.tick());
  CHECK(kept_free_bytes() < int64_t(8 * mib));
  // The next unit sets a new reference.
  touch_and_free(64 * mib);
  CHECK_FALSE(bound.tick());
  CHECK_FALSE(bound.tick());
}
#else
TEST_CASE("without jemalloc the programs run on glibc's malloc", "[core][allocator]") {
  if (std::getenv("LD_PRELOAD") != nullptr) return;  // a preloaded allocator is named by what it is
  CHECK(allocator_name() == "glibc malloc");
  CHECK(kept_free_bytes() == 0);
  FreePagesBound bound;
  CHECK_FALSE(bound.tick());
  CHECK_FALSE(bound.tick());
  CHECK(system_info(torch::Device(torch::kCPU)).at("allocator") == "glibc malloc");  // stores record it
  // glibc maps a block this size fresh and unmaps it on free: the resident set returns.
  const double before = rss_mib();
  touch_and_free(size_t(256) << 20);
  release_free_memory();
  CHECK(rss_mib() < before + 50);
}
#endif
