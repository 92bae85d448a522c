#include "core/hash.h"

#include <algorithm>
#include <cstdio>

namespace mambamt::core {

std::string Fnv64::hex(int digits) const {
  uint64_t h = h_;
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdULL;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ULL;
  h ^= h >> 33;
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
  return std::string(buf, static_cast<size_t>(std::clamp(digits, 0, 16)));
}

}  // namespace mambamt::core
