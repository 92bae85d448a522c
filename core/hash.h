#pragma once
// A 64-bit FNV-1a hash fed piece by piece, with a final avalanche so that
// nearby inputs differ in the leading hex digits too. Not cryptographic:
// experiment ids (short_hash) and corpus fingerprints.
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

}  // namespace mambamt::core
