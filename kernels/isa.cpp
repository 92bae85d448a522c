#include "kernels/isa.h"

#include "kernels/cpu/simd.h"

namespace mambamt::kernels {

std::string cpu_isa() { return cpu::float_kernels().name; }

}  // namespace mambamt::kernels
