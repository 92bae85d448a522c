#pragma once
// The heap allocator that serves this process's malloc.
//
// mambamt's programs link jemalloc where it is installed (cmake/Allocator.cmake)
// with settings that keep freed pages for reuse (core/jemalloc_conf.c): CPU
// training allocates and frees activations of tens to hundreds of MiB every
// step, and glibc's malloc maps each one fresh from the kernel and unmaps it on
// free, so every step paid a page fault per 4 KiB page (measured: 4 to 6 times
// the step time of the small preset at 2048 tokens with `mambamt bench train`).
#include <cstdint>
#include <string>

namespace mambamt::core {

// The library that serves malloc and its version, e.g. "jemalloc 5.3.0-0-g54eaed1..."
// or "glibc malloc" (also right when jemalloc is preloaded with LD_PRELOAD).
std::string allocator_name();

// Returns the free pages the allocator keeps to the system: jemalloc purges
// every arena, glibc's malloc trims its heaps (malloc_trim). Call it before a
// measurement of resident memory, so pages kept from earlier work do not hide
// the measured work's own.
void release_free_memory();

// Bytes of the free pages the allocator keeps for reuse (jemalloc's dirty
// pages; 0 with glibc's malloc, whose kept pages this does not track).
int64_t kept_free_bytes();

// Bounds the free pages jemalloc keeps over a loop of similar work (training
// steps, evaluation batches). jemalloc_conf.c has jemalloc keep freed pages
// for good, which makes a steady loop fault-free, but with shapes that change
// from step to step (batches of different lengths) freed blocks do not always
// fit the next requests and the kept set grows: 288 MiB to 2.3 GiB over the
// demo's 300 Transformer steps. tick() after each unit of work hands the pages
// back when more are kept than twice what the first unit after the last
// hand-back left, plus 64 MiB: a steady loop never pays, a growing one pays one
// unit's page faults each time its kept set doubles.
class FreePagesBound {
 public:
  // Returns whether it handed pages back.
  bool tick();

 private:
  int64_t reference_ = -1;  // kept bytes after the first unit since the last hand-back; -1: not yet
};

}  // namespace mambamt::core
