#pragma once
// Number formats of the plan reports (`mambamt plan`; internal to models/).
#include <cstdint>
#include <iomanip>
#include <sstream>
#include <string>

namespace mambamt::models::detail {

// 77123456 -> "77,123,456".
inline std::string with_commas(int64_t v) {
  const std::string s = std::to_string(v);
  std::string out;
  int k = 0;
  for (auto it = s.rbegin(); it != s.rend(); ++it) {
    if (k && k % 3 == 0 && *it != '-') out.push_back(',');
    out.push_back(*it);
    ++k;
  }
  return {out.rbegin(), out.rend()};
}

// 77123456 -> "77.1M".
inline std::string millions(int64_t v) {
  std::ostringstream s;
  s << std::fixed << std::setprecision(1) << static_cast<double>(v) / 1e6 << "M";
  return s.str();
}

}  // namespace mambamt::models::detail
