#include "core/error.h"

namespace mambamt {

std::string located(const std::string& file, long line, long col, const std::string& message) {
  std::string out = file;
  if (line > 0) {
    out += ":" + std::to_string(line);
    if (col > 0) out += ":" + std::to_string(col);
  }
  out += ": ";
  out += message;
  return out;
}

}  // namespace mambamt
