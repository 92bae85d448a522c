// The JSON value, writer and reader used for the collector's json output.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "core/error.h"
#include "results/json.h"
#include "test_support.h"

using namespace mambamt::results;

TEST_CASE("JSON writer: order, escaping, numbers, NaN as null") {
  JsonValue v;
  v["name"] = "hybrid \"1:7\"\n<mid>";
  v["bleu"] = 34.25;
  v["steps"] = 12000;
  v["big"] = static_cast<std::int64_t>(9007199254740993LL);  // above 2^53: kept exact
  v["nan"] = std::numeric_limits<double>::quiet_NaN();
  v["inf"] = std::numeric_limits<double>::infinity();
  v["ok"] = true;
  v["none"] = nullptr;
  v["tokens"] = JsonValue::Array{"▁Haus", "\x01", "日本"};
  v["empty"] = JsonValue::object();
  CHECK(to_json(v, 0) ==
        "{\"name\":\"hybrid \\\"1:7\\\"\\n<mid>\",\"bleu\":34.25,\"steps\":12000,"
        "\"big\":9007199254740993,\"nan\":null,\"inf\":null,\"ok\":true,\"none\":null,"
        "\"tokens\":[\"▁Haus\",\"\\u0001\",\"日本\"],\"empty\":{}}");
  CHECK(to_json(JsonValue::Array{1, 2}, 2) == "[\n  1,\n  2\n]");
  CHECK(to_json(0.1) == "0.1");
  CHECK(to_json(1e-14) == "1e-14");
  CHECK(to_json(-0.0) == "-0");
  CHECK(json_escape(std::string("bad\xff")) == "bad\xEF\xBF\xBD");
}

TEST_CASE("JSON reader round-trips and reports errors with line and column") {
  JsonValue v;
  v["a"] = JsonValue::Array{1, 2.5, "x", nullptr, false, JsonValue::object()};
  v["b"]["nested"] = -3;
  v["u"] = "é😀\t";
  for (int indent : {0, 2}) {
    JsonValue back = parse_json(to_json(v, indent));
    CHECK(back == v);
  }
  JsonValue p = parse_json(R"({"s": "\u00e9\ud83d\ude00\/", "n": -1.5e2, "i": 42, "arr": [ ] })");
  CHECK(p.at("s").as_string() == "é😀/");
  CHECK(p.at("n").as_number() == -150);
  CHECK(p.at("i").is_integer());
  CHECK(p.at("i").as_int() == 42);
  CHECK(p.at("arr").size() == 0);
  CHECK(p.find("missing") == nullptr);
  CHECK_THROWS_AS(p.at("missing"), mambamt::Error);
  CHECK_THROWS_AS(p.at("s").as_number(), mambamt::Error);

  try {
    parse_json("{\n  \"a\": 1,\n  \"b\": tru\n}", "x.json");
    FAIL("no error");
  } catch (const mambamt::InputError& e) {
    CHECK(std::string(e.what()).rfind("x.json:3:8:", 0) == 0);
  }
  CHECK_THROWS_AS(parse_json("[1, 2"), mambamt::InputError);
  CHECK_THROWS_AS(parse_json("{\"a\" 1}"), mambamt::InputError);
  CHECK_THROWS_AS(parse_json("01"), mambamt::InputError);
  CHECK_THROWS_AS(parse_json("\"tab\there\""), mambamt::InputError);
  CHECK_THROWS_AS(parse_json("[1] x"), mambamt::InputError);
  CHECK(parse_json("1e400").as_number() == std::numeric_limits<double>::infinity());
}

TEST_CASE("JSON files are written atomically") {
  mambamt::results::testing::TempDir dir;
  const std::string path = (dir.path() / "summary.json").string();
  JsonValue v;
  v["score"] = 1.5;
  write_json_file(path, v);
  CHECK(read_json_file(path) == v);
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  CHECK_THROWS_AS(read_json_file((dir.path() / "nope.json").string()), mambamt::InputError);
}
