#pragma once
// A small deterministic random generator (xoshiro256** seeded by splitmix64)
// with its own uniform and shuffle. The standard library's distributions are
// implementation-defined, so they would give different corpora, CAT-N draws
// and batch orders under libstdc++ and libc++; these do not.
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace mambamt::data::detail {

inline uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// Mixes a seed with stream tags (e.g. {seed, epoch, kCatN}) into one seed, so
// that independent uses of one user seed draw independent streams.
inline uint64_t mix_seed(std::initializer_list<uint64_t> parts) {
  uint64_t h = 0x6A09E667F3BCC909ULL;
  for (uint64_t p : parts) {
    uint64_t x = h ^ p;
    h = splitmix64(x);
  }
  return h;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) {
    for (auto& s : s_) s = splitmix64(seed);
  }

  uint64_t next() {
    const uint64_t result = rotl(s_[1] * 5, 7) * 9;
    const uint64_t t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = rotl(s_[3], 45);
    return result;
  }

  // Uniform in [0, n) without modulo bias (Lemire's method); n >= 1.
  uint64_t below(uint64_t n) {
    __uint128_t m = static_cast<__uint128_t>(next()) * n;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < n) {
      const uint64_t threshold = (0 - n) % n;
      while (low < threshold) {
        m = static_cast<__uint128_t>(next()) * n;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }

  // Uniform integer in [lo, hi].
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

  // Uniform in [0, 1) with 53 random bits.
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

  bool bernoulli(double p) { return uniform() < p; }

  template <typename T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i) {
      std::swap(v[i - 1], v[below(i)]);
    }
  }

  // Index drawn with probability proportional to cumulative[i] - cumulative[i-1]
  // (cumulative is non-decreasing and ends with the total weight).
  size_t weighted(const std::vector<double>& cumulative) {
    const double r = uniform() * cumulative.back();
    size_t lo = 0, hi = cumulative.size() - 1;
    while (lo < hi) {
      const size_t mid = (lo + hi) / 2;
      if (cumulative[mid] > r) hi = mid; else lo = mid + 1;
    }
    return lo;
  }

 private:
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t s_[4];
};

}  // namespace mambamt::data::detail
