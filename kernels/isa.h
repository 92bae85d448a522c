#pragma once
// Which instruction set the CPU kernels run with on this machine.
#include <string>

namespace mambamt::kernels {

// "avx512", "avx2" or "generic": chosen once at run time from the CPU's
// features (MAMBAMT_CPU_KERNELS=generic|avx2|avx512 forces one). For logs and
// benchmark reports.
std::string cpu_isa();

}  // namespace mambamt::kernels
