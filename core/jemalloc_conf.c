/* jemalloc's settings in the programs that link it (cmake/Allocator.cmake),
 * read by jemalloc at its first allocation; MALLOC_CONF in the environment
 * still overrides them.
 *
 * - oversize_threshold:0 serves large allocations from the ordinary arenas.
 *   By default jemalloc gives allocations of 8 MiB and more an arena of their
 *   own that returns their pages to the system at once, and CPU training's
 *   activations are that size: each step would fault them all in again.
 * - dirty_decay_ms:-1, muzzy_decay_ms:-1: freed pages stay with the process
 *   for the next step instead of being handed back over the next seconds
 *   (a training step of a long document takes seconds on a CPU). jemalloc's
 *   time-based decay, even at 30 or 60 s, purged most of them within a step
 *   here (4x the page faults of glibc, as slow). The resident set stays at the
 *   process's peak; core::FreePagesBound bounds the kept pages in loops whose
 *   shapes change, core::release_free_memory() hands them back where a
 *   measurement needs it.
 *
 * Measured with `mambamt bench train --preset small --lengths 512,2048
 * --threads 2` (bench/README.md): glibc malloc against this. */
const char* malloc_conf = "oversize_threshold:0,dirty_decay_ms:-1,muzzy_decay_ms:-1";
