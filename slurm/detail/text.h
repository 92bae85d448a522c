#pragma once
// Text helper of the Slurm readers (batch scripts, the job's environment).
#include <cctype>
#include <string>

namespace mambamt::slurm::detail {

// The string without leading and trailing ASCII whitespace.
inline std::string trim(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

}  // namespace mambamt::slurm::detail
