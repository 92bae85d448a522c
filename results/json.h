#pragma once
// JSON is nlohmann::ordered_json (objects keep insertion order, so output is
// deterministic). What the project adds on top: the writer of its json files
// and a reader whose errors name the file, line and column.
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace mambamt::results {

// Writes `value` as the project's json files have it: indent 0 gives one line,
// otherwise members on their own lines; doubles in their shortest round-trip
// form ("31", "1e-05"); NaN and infinities as null (pandas reads null as NaN);
// invalid UTF-8 in strings as U+FFFD.
std::string dump_json(const nlohmann::ordered_json& value, int indent = 2);

// Parses JSON text (RFC 8259). Errors throw InputError "source:line:col: message".
nlohmann::ordered_json parse_json(std::string_view text, std::string_view source = "<json>");
// Reads and parses a file (InputError names the path).
nlohmann::ordered_json read_json_file(const std::string& path);

}  // namespace mambamt::results
