#pragma once
// A small JSON value with a writer and a reader, for the collector's json output
// and for test data. Objects keep insertion order so output is deterministic;
// NaN and infinities are written as null (pandas reads null as NaN).
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace mambamt::results {

class JsonValue {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<JsonValue>;
  using Object = std::vector<std::pair<std::string, JsonValue>>;

  JsonValue() = default;
  JsonValue(std::nullptr_t) {}
  JsonValue(bool value) : type_(Type::kBool), bool_(value) {}
  JsonValue(double value) : type_(Type::kNumber), number_(value) {}
  JsonValue(int value) : JsonValue(IntTag{}, value) {}
  JsonValue(long value) : JsonValue(IntTag{}, value) {}
  JsonValue(long long value) : JsonValue(IntTag{}, value) {}
  JsonValue(unsigned value) : JsonValue(IntTag{}, value) {}
  JsonValue(unsigned long value) : JsonValue(IntTag{}, static_cast<std::int64_t>(value)) {}
  JsonValue(unsigned long long value) : JsonValue(IntTag{}, static_cast<std::int64_t>(value)) {}
  JsonValue(const char* value) : type_(Type::kString), string_(value) {}
  JsonValue(std::string value) : type_(Type::kString), string_(std::move(value)) {}
  JsonValue(std::string_view value) : type_(Type::kString), string_(value) {}
  JsonValue(Array value) : type_(Type::kArray), array_(std::move(value)) {}
  JsonValue(Object value) : type_(Type::kObject), object_(std::move(value)) {}

  static JsonValue array() { return JsonValue(Array{}); }
  static JsonValue object() { return JsonValue(Object{}); }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  // A number written without fraction or exponent that fits in 64 bits.
  bool is_integer() const { return type_ == Type::kNumber && is_integer_; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  // Accessors throw mambamt::Error when the type is wrong.
  bool as_bool() const;
  double as_number() const;
  std::int64_t as_int() const;  // integers, and numbers with an integral value
  const std::string& as_string() const;
  const Array& as_array() const;
  Array& as_array();
  const Object& as_object() const;
  Object& as_object();

  // Arrays and objects: number of elements; 0 for the other types.
  std::size_t size() const;
  const JsonValue& operator[](std::size_t index) const;  // throws when out of range
  void push_back(JsonValue value);                        // null becomes an array

  // Objects. operator[] inserts a null member when missing (null becomes an object).
  JsonValue& operator[](std::string_view key);
  const JsonValue& at(std::string_view key) const;  // throws naming the key when missing
  const JsonValue* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }

  bool operator==(const JsonValue& other) const;
  bool operator!=(const JsonValue& other) const { return !(*this == other); }

 private:
  struct IntTag {};
  JsonValue(IntTag, std::int64_t value)
      : type_(Type::kNumber), number_(static_cast<double>(value)), is_integer_(true), int_(value) {}

  Type type_ = Type::kNull;
  bool bool_ = false;
  double number_ = 0;
  bool is_integer_ = false;
  std::int64_t int_ = 0;
  std::string string_;
  Array array_;
  Object object_;
};

// Writes `value`; indent 0 gives one line, otherwise members on their own lines.
// Doubles are written with the fewest digits that read back to the same value.
std::string to_json(const JsonValue& value, int indent = 2);

// Parses JSON text (RFC 8259). Errors throw InputError "source:line:col: message".
JsonValue parse_json(std::string_view text, std::string_view source = "<json>");
// Reads and parses a file (InputError names the path).
JsonValue read_json_file(const std::string& path);
// Writes to `path` through a temporary file and a rename, so a crash never leaves
// a half-written file under the real name.
void write_json_file(const std::string& path, const JsonValue& value, int indent = 2);

// Escapes a string for a JSON string literal (without the quotes); invalid UTF-8
// becomes U+FFFD.
std::string json_escape(std::string_view text);

}  // namespace mambamt::results
