#include "results/json.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "results/unicode.h"

namespace mambamt::results {
namespace {

const char* type_name(JsonValue::Type type) {
  switch (type) {
    case JsonValue::Type::kNull: return "null";
    case JsonValue::Type::kBool: return "a boolean";
    case JsonValue::Type::kNumber: return "a number";
    case JsonValue::Type::kString: return "a string";
    case JsonValue::Type::kArray: return "an array";
    case JsonValue::Type::kObject: return "an object";
  }
  return "?";
}

[[noreturn]] void wrong_type(JsonValue::Type have, const char* want) {
  throw Error(std::string("JSON value is ") + type_name(have) + ", not " + want);
}

std::string format_double(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, res.ptr);
}

void write(std::string& out, const JsonValue& v, int indent, int depth) {
  auto newline = [&](int d) {
    if (indent <= 0) return;
    out.push_back('\n');
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case JsonValue::Type::kNull: out += "null"; break;
    case JsonValue::Type::kBool: out += v.as_bool() ? "true" : "false"; break;
    case JsonValue::Type::kNumber:
      out += v.is_integer() ? std::to_string(v.as_int()) : format_double(v.as_number());
      break;
    case JsonValue::Type::kString:
      out.push_back('"');
      out += json_escape(v.as_string());
      out.push_back('"');
      break;
    case JsonValue::Type::kArray: {
      const auto& a = v.as_array();
      if (a.empty()) {
        out += "[]";
        break;
      }
      out.push_back('[');
      for (std::size_t i = 0; i < a.size(); ++i) {
        if (i) out.push_back(',');
        newline(depth + 1);
        write(out, a[i], indent, depth + 1);
      }
      newline(depth);
      out.push_back(']');
      break;
    }
    case JsonValue::Type::kObject: {
      const auto& o = v.as_object();
      if (o.empty()) {
        out += "{}";
        break;
      }
      out.push_back('{');
      for (std::size_t i = 0; i < o.size(); ++i) {
        if (i) out.push_back(',');
        newline(depth + 1);
        out.push_back('"');
        out += json_escape(o[i].first);
        out += indent > 0 ? "\": " : "\":";
        write(out, o[i].second, indent, depth + 1);
      }
      newline(depth);
      out.push_back('}');
      break;
    }
  }
}

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  JsonValue parse_document() {
    skip_ws();
    JsonValue v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("unexpected text after the JSON value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 512;

  [[noreturn]] void fail(const std::string& message) const {
    long line = 1, col = 1;
    for (std::size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    throw InputError(located(std::string(source_), line, col, message));
  }

  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  JsonValue parse_value(int depth) {
    if (depth > kMaxDepth) fail("JSON nested too deeply");
    if (pos_ >= text_.size()) fail("unexpected end of JSON");
    char c = text_[pos_];
    switch (c) {
      case '{': return parse_object(depth);
      case '[': return parse_array(depth);
      case '"': return JsonValue(parse_string());
      case 't':
        if (consume("true")) return JsonValue(true);
        break;
      case 'f':
        if (consume("false")) return JsonValue(false);
        break;
      case 'n':
        if (consume("null")) return JsonValue();
        break;
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return parse_number();
    }
    fail(std::string("unexpected character '") + c + "'");
  }

  JsonValue parse_object(int depth) {
    ++pos_;  // {
    JsonValue obj = JsonValue::object();
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return obj;
    }
    while (true) {
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':' after an object key");
      ++pos_;
      skip_ws();
      obj.as_object().emplace_back(std::move(key), parse_value(depth + 1));
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == '}') {
        ++pos_;
        return obj;
      }
      fail("expected ',' or '}' in an object");
    }
  }

  JsonValue parse_array(int depth) {
    ++pos_;  // [
    JsonValue arr = JsonValue::array();
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return arr;
    }
    while (true) {
      skip_ws();
      arr.as_array().push_back(parse_value(depth + 1));
      skip_ws();
      if (pos_ < text_.size() && text_[pos_] == ',') {
        ++pos_;
        continue;
      }
      if (pos_ < text_.size() && text_[pos_] == ']') {
        ++pos_;
        return arr;
      }
      fail("expected ',' or ']' in an array");
    }
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; ++k) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  std::string parse_string() {
    ++pos_;  // opening quote
    std::string out;
    while (true) {
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"': out.push_back('"'); break;
        case '\\': out.push_back('\\'); break;
        case '/': out.push_back('/'); break;
        case 'b': out.push_back('\b'); break;
        case 'f': out.push_back('\f'); break;
        case 'n': out.push_back('\n'); break;
        case 'r': out.push_back('\r'); break;
        case 't': out.push_back('\t'); break;
        case 'u': {
          char32_t cp = parse_hex4();
          if (cp >= 0xD800 && cp <= 0xDBFF && text_.substr(pos_, 2) == "\\u") {
            std::size_t save = pos_;
            pos_ += 2;
            char32_t low = parse_hex4();
            if (low >= 0xDC00 && low <= 0xDFFF) {
              cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            } else {
              pos_ = save;  // lone high surrogate; the next escape stands alone
            }
          }
          append_utf8(out, cp);  // lone surrogates become U+FFFD
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
  }

  JsonValue parse_number() {
    std::size_t start = pos_;
    bool integral = true;
    if (text_[pos_] == '-') ++pos_;
    auto digits = [&] {
      std::size_t d = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') ++pos_;
      return pos_ - d;
    };
    if (pos_ < text_.size() && text_[pos_] == '0') {
      ++pos_;
    } else if (digits() == 0) {
      fail("bad number");
    }
    if (pos_ < text_.size() && text_[pos_] == '.') {
      integral = false;
      ++pos_;
      if (digits() == 0) fail("bad number: digits expected after '.'");
    }
    if (pos_ < text_.size() && (text_[pos_] == 'e' || text_[pos_] == 'E')) {
      integral = false;
      ++pos_;
      if (pos_ < text_.size() && (text_[pos_] == '+' || text_[pos_] == '-')) ++pos_;
      if (digits() == 0) fail("bad number: digits expected in the exponent");
    }
    const char* first = text_.data() + start;
    const char* last = text_.data() + pos_;
    if (integral) {
      long long v = 0;
      auto res = std::from_chars(first, last, v);
      if (res.ec == std::errc() && res.ptr == last) return JsonValue(v);
    }
    double d = 0;
    auto res = std::from_chars(first, last, d);
    if (res.ptr != last) fail("bad number");
    // Out of range: from_chars leaves d unchanged; JSON readers give +-inf or 0.
    if (res.ec == std::errc::result_out_of_range) {
      bool exp_negative = std::string_view(first, pos_ - start).find("e-") != std::string_view::npos ||
                          std::string_view(first, pos_ - start).find("E-") != std::string_view::npos;
      d = exp_negative ? 0.0 : HUGE_VAL;
      if (*first == '-') d = -d;
    }
    return JsonValue(d);
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

}  // namespace

bool JsonValue::as_bool() const {
  if (type_ != Type::kBool) wrong_type(type_, "a boolean");
  return bool_;
}

double JsonValue::as_number() const {
  if (type_ != Type::kNumber) wrong_type(type_, "a number");
  return number_;
}

std::int64_t JsonValue::as_int() const {
  if (type_ != Type::kNumber) wrong_type(type_, "a number");
  if (is_integer_) return int_;
  if (std::trunc(number_) != number_ || std::fabs(number_) > 9.0e18) {
    throw Error("JSON number " + format_double(number_) + " is not an integer");
  }
  return static_cast<std::int64_t>(number_);
}

const std::string& JsonValue::as_string() const {
  if (type_ != Type::kString) wrong_type(type_, "a string");
  return string_;
}

const JsonValue::Array& JsonValue::as_array() const {
  if (type_ != Type::kArray) wrong_type(type_, "an array");
  return array_;
}

JsonValue::Array& JsonValue::as_array() {
  if (type_ != Type::kArray) wrong_type(type_, "an array");
  return array_;
}

const JsonValue::Object& JsonValue::as_object() const {
  if (type_ != Type::kObject) wrong_type(type_, "an object");
  return object_;
}

JsonValue::Object& JsonValue::as_object() {
  if (type_ != Type::kObject) wrong_type(type_, "an object");
  return object_;
}

std::size_t JsonValue::size() const {
  if (type_ == Type::kArray) return array_.size();
  if (type_ == Type::kObject) return object_.size();
  return 0;
}

const JsonValue& JsonValue::operator[](std::size_t index) const {
  const auto& a = as_array();
  if (index >= a.size()) {
    throw Error("JSON array index " + std::to_string(index) + " out of range (size " +
                std::to_string(a.size()) + ")");
  }
  return a[index];
}

void JsonValue::push_back(JsonValue value) {
  if (type_ == Type::kNull) type_ = Type::kArray;
  as_array().push_back(std::move(value));
}

JsonValue& JsonValue::operator[](std::string_view key) {
  if (type_ == Type::kNull) type_ = Type::kObject;
  auto& o = as_object();
  for (auto& [k, v] : o) {
    if (k == key) return v;
  }
  o.emplace_back(std::string(key), JsonValue());
  return o.back().second;
}

const JsonValue* JsonValue::find(std::string_view key) const {
  for (const auto& [k, v] : as_object()) {
    if (k == key) return &v;
  }
  return nullptr;
}

const JsonValue& JsonValue::at(std::string_view key) const {
  const JsonValue* v = find(key);
  if (!v) throw Error("JSON object has no member '" + std::string(key) + "'");
  return *v;
}

bool JsonValue::operator==(const JsonValue& other) const {
  if (type_ != other.type_) return false;
  switch (type_) {
    case Type::kNull: return true;
    case Type::kBool: return bool_ == other.bool_;
    case Type::kNumber:
      if (is_integer_ && other.is_integer_) return int_ == other.int_;
      return number_ == other.number_;
    case Type::kString: return string_ == other.string_;
    case Type::kArray: return array_ == other.array_;
    case Type::kObject: return object_ == other.object_;
  }
  return false;
}

std::string json_escape(std::string_view text) {
  std::string valid;
  bool ascii = true;
  for (char c : text) ascii &= (static_cast<unsigned char>(c) < 0x80);
  if (!ascii) {
    valid = encode_utf8(decode_utf8(text));
    text = valid;
  }
  std::string out;
  out.reserve(text.size() + 2);
  for (char c : text) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string to_json(const JsonValue& value, int indent) {
  std::string out;
  write(out, value, indent, 0);
  return out;
}

JsonValue parse_json(std::string_view text, std::string_view source) {
  return Parser(text, source).parse_document();
}

JsonValue read_json_file(const std::string& path) {
  return parse_json(core::read_file(path), path);
}

void write_json_file(const std::string& path, const JsonValue& value, int indent) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp.string() + ": cannot open for writing");
    out << to_json(value, indent) << '\n';
    out.flush();
    if (!out) throw Error(tmp.string() + ": write failed");
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) throw Error("cannot rename " + tmp.string() + " to " + path + ": " + ec.message());
}

}  // namespace mambamt::results
