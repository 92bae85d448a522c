#pragma once
// A 64-bit FNV-1a hash fed piece by piece, with a final avalanche so that
// nearby inputs differ in the leading hex digits too. Not cryptographic:
// experiment ids (short_hash) and corpus fingerprints. And CRC-32C, the
// checksum of the HDF5 files mambamt writes (core/hdf5.h).
#include <cstddef>
#include <cstdint>
#include <string>

namespace mambamt::core {

class Fnv64 {
 public:
  void add(const std::string& text) {
    for (unsigned char c : text) add_byte(c);
  }
  void add_byte(unsigned char c) {
    h_ ^= c;
    h_ *= 1099511628211ULL;
  }
  // The first `digits` (at most 16) lowercase hex digits of the mixed hash.
  std::string hex(int digits = 16) const;

 private:
  uint64_t h_ = 1469598103934665603ULL;
};

// CRC-32C (Castagnoli, as iSCSI and ext4 use it) of `n` bytes, continuing
// from `crc` (0 to start): crc32c(crc32c(0, a), b) is the CRC of a then b.
// With SSE 4.2 (every x86-64 of the last fifteen years) the crc32
// instruction, else slicing by 8 tables.
uint32_t crc32c(uint32_t crc, const void* data, size_t n);
// The table version alone (for the test that both agree).
uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n);

}  // namespace mambamt::core
