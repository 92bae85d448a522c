// Beam search's row gather of decode states (kernels/state.h): a memcpy per
// row block, in parallel. LibTorch's index_select copied a step's states on
// one thread, at about half the bandwidth two threads reach.
#include <ATen/Parallel.h>

#include <algorithm>
#include <cstring>

#include "kernels/cpu/cpu.h"

namespace mambamt::kernels::cpu {

void gather_rows(const char* src, char* dst, const int64_t* index, int64_t rows, int64_t row_bytes, int64_t blocks,
                 int64_t block_stride, int64_t block_bytes) {
  if (rows == 0 || blocks == 0 || block_bytes == 0) return;
  // Tasks of at least 256 KiB: a beam's state rows are hundreds of KiB to MiB,
  // a short cache's blocks a few KiB.
  const int64_t grain = std::max<int64_t>(1, (256 << 10) / block_bytes);
  at::parallel_for(0, rows * blocks, grain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const int64_t r = i / blocks, b = i % blocks;
      std::memcpy(dst + r * row_bytes + b * block_stride, src + index[r] * row_bytes + b * block_stride,
                  static_cast<size_t>(block_bytes));
    }
  });
}

}  // namespace mambamt::kernels::cpu
