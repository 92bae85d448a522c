#include "results/json.h"

#include <charconv>
#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/fs.h"

namespace mambamt::results {
namespace {

using Json = nlohmann::ordered_json;

// nlohmann's dump() writes doubles its own way (31.0, -0.0, 0.0001, 100000.0)
// and has no option to change it; the json files have always had the shortest
// round-trip form of std::to_chars (31, -0, 1e-04, 1e+05). So containers and
// doubles are written here, everything else (strings with their escaping,
// integers, booleans, null) by nlohmann.
void write(std::string& out, const Json& v, int indent, int depth) {
  constexpr auto kReplace = Json::error_handler_t::replace;  // invalid UTF-8 -> U+FFFD, not an exception
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!std::isfinite(d)) {
      out += "null";
      return;
    }
    char buf[32];
    out.append(buf, std::to_chars(buf, buf + sizeof buf, d).ptr);
    return;
  }
  if (!v.is_structured() || v.empty()) {
    out += v.dump(-1, ' ', false, kReplace);
    return;
  }
  auto newline = [&](int d) {
    if (indent <= 0) return;
    out.push_back('\n');
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  out.push_back(v.is_object() ? '{' : '[');
  for (auto it = v.begin(); it != v.end(); ++it) {
    if (it != v.begin()) out.push_back(',');
    newline(depth + 1);
    if (v.is_object()) {
      out += Json(it.key()).dump(-1, ' ', false, kReplace);
      out += indent > 0 ? ": " : ":";
    }
    write(out, it.value(), indent, depth + 1);
  }
  newline(depth);
  out.push_back(v.is_object() ? '}' : ']');
}

}  // namespace

std::string dump_json(const Json& value, int indent) {
  std::string out;
  write(out, value, indent, 0);
  return out;
}

Json parse_json(std::string_view text, std::string_view source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // e.byte counts the bytes read, the offending one included; line and
    // column are those of that byte (one past the end at the end of input).
    // nlohmann's own "line 4, column 0" names the line after a newline.
    const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, text.size());
    const std::string_view before = text.substr(0, at);
    const long line = 1 + static_cast<long>(std::count(before.begin(), before.end(), '\n'));
    const std::size_t line_start = before.rfind('\n');
    const long col = static_cast<long>(at - (line_start == std::string_view::npos ? 0 : line_start + 1)) + 1;
    std::string message = e.what();  // "[json.exception.parse_error.101] parse error at line L, column C: ..."
    if (const std::size_t p = message.find(": ", message.find("column ")); p != std::string::npos) {
      message.erase(0, p + 2);
    }
    throw InputError(located(std::string(source), line, col, message));
  } catch (const Json::exception& e) {
    // Numbers out of range ("number overflow parsing '1e400'") come without a place.
    std::string message = e.what();
    if (const std::size_t p = message.find("] "); p != std::string::npos) message.erase(0, p + 2);
    throw InputError(std::string(source) + ": " + message);
  }
}

Json read_json_file(const std::string& path) {
  return parse_json(core::read_file(path), path);
}

}  // namespace mambamt::results
