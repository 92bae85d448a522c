#pragma once
// The heap allocator that serves this process's malloc.
//
// mambamt's programs link jemalloc where it is installed (cmake/Allocator.cmake)
// with settings that keep freed pages for reuse (core/jemalloc_conf.c): CPU
// training allocates and frees activations of tens to hundreds of MiB every
// step, and glibc's malloc maps each one fresh from the kernel and unmaps it on
// free, so every step paid a page fault per 4 KiB page (measured: 3 to 7 times
// the step time of the small preset at 2048 tokens, bench/README.md).
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

}  // namespace mambamt::core
