#pragma once
// CPU implementations of the ops, over the params structs of detail/params.h.
// Activations arrive as float or double (the host converts bfloat16/float16);
// every other pointer is in the same type. Parallel over batch and heads or
// channels with at::parallel_for (LibTorch's intra-op thread pool).
#include "kernels/detail/params.h"

namespace mambamt::kernels::cpu {

void ssd_forward(const detail::SsdParams& p);
void ssd_backward(const detail::SsdBwdParams& p);
void ssd_step(const detail::SsdStepParams& p);

void selective_scan_forward(const detail::ScanParams& p);
void selective_scan_backward(const detail::ScanBwdParams& p);
void selective_scan_step(const detail::ScanStepParams& p);

void conv1d_forward(const detail::ConvParams& p);
void conv1d_backward(const detail::ConvBwdParams& p);
void conv1d_step(const detail::ConvStepParams& p);

// dst row r = src row index[r] for r < rows (index values in range), rows of
// row_bytes bytes in both; only `blocks` blocks of block_bytes bytes, at
// block_stride from each other, of each row are copied.
void gather_rows(const char* src, char* dst, const int64_t* index, int64_t rows, int64_t row_bytes, int64_t blocks,
                 int64_t block_stride, int64_t block_bytes);

}  // namespace mambamt::kernels::cpu
