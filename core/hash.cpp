#include "core/hash.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstring>

#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

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

namespace {

constexpr uint32_t kCastagnoli = 0x82F63B78u;  // the polynomial, bits reflected

// t[0] is the byte-at-a-time table; t[k][b] is the CRC of byte b followed by
// k zero bytes, so eight bytes fold in with eight lookups.
using Tables = std::array<std::array<uint32_t, 256>, 8>;

const Tables& tables() {
  static const Tables t = [] {
    Tables out{};
    for (uint32_t b = 0; b < 256; ++b) {
      uint32_t c = b;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (kCastagnoli & (0u - (c & 1u)));
      out[0][b] = c;
    }
    for (size_t k = 1; k < 8; ++k)
      for (uint32_t b = 0; b < 256; ++b) out[k][b] = (out[k - 1][b] >> 8) ^ out[0][out[k - 1][b] & 0xFF];
    return out;
  }();
  return t;
}

// Both work on the inverted register (the caller inverts on the way in and out).
uint32_t update_portable(uint32_t c, const unsigned char* p, size_t n) {
  const Tables& t = tables();
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  for (; n >= 8; p += 8, n -= 8) {
    uint32_t lo;
    uint32_t hi;
    std::memcpy(&lo, p, 4);
    std::memcpy(&hi, p + 4, 4);
    lo ^= c;  // little-endian: the register meets the first four bytes
    c = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^ t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^ t[3][hi & 0xFF] ^
        t[2][(hi >> 8) & 0xFF] ^ t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
  }
#endif
  for (; n > 0; ++p, --n) c = (c >> 8) ^ t[0][(c ^ *p) & 0xFF];
  return c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) uint32_t update_sse42(uint32_t c, const unsigned char* p, size_t n) {
  uint64_t c64 = c;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c64 = _mm_crc32_u64(c64, w);
  }
  c = static_cast<uint32_t>(c64);
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(c, *p);
  return c;
}

bool has_sse42() {
  static const bool yes = __builtin_cpu_supports("sse4.2");
  return yes;
}
#endif

}  // namespace

uint32_t crc32c_portable(uint32_t crc, const void* data, size_t n) {
  return ~update_portable(~crc, static_cast<const unsigned char*>(data), n);
}

uint32_t crc32c(uint32_t crc, const void* data, size_t n) {
#if defined(__x86_64__)
  if (has_sse42()) return ~update_sse42(~crc, static_cast<const unsigned char*>(data), n);
#endif
  return crc32c_portable(crc, data, n);
}

}  // namespace mambamt::core
