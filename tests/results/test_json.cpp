// The project's json files (nlohmann::ordered_json underneath): how they are
// written and what a reader error says.
#include <catch2/catch.hpp>

#include <fstream>
#include <limits>
#include <string>

#include "core/error.h"
#include "results/json.h"
#include "test_support.h"

using namespace mambamt::results;
using Json = nlohmann::ordered_json;

TEST_CASE("JSON writer: order, escaping, numbers, NaN as null") {
  Json v;
  v["name"] = "hybrid \"1:7\"\n<mid>";
  v["bleu"] = 34.25;
  v["steps"] = 12000;
  v["big"] = static_cast<std::int64_t>(9007199254740993LL);  // above 2^53: kept exact
  v["nan"] = std::numeric_limits<double>::quiet_NaN();
  v["inf"] = std::numeric_limits<double>::infinity();
  v["ok"] = true;
  v["none"] = nullptr;
  v["tokens"] = Json::array({"▁Haus", "\x01", "日本"});
  v["empty"] = Json::object();
  v["a_before_z"] = Json::array();  // insertion order, not sorted
  CHECK(dump_json(v, 0) ==
        "{\"name\":\"hybrid \\\"1:7\\\"\\n<mid>\",\"bleu\":34.25,\"steps\":12000,"
        "\"big\":9007199254740993,\"nan\":null,\"inf\":null,\"ok\":true,\"none\":null,"
        "\"tokens\":[\"▁Haus\",\"\\u0001\",\"日本\"],\"empty\":{},\"a_before_z\":[]}");
  CHECK(dump_json(Json::array({1, 2}), 2) == "[\n  1,\n  2\n]");
  CHECK(dump_json(Json{{"a", Json::array({1.5, Json::object({{"b", nullptr}})})}}) ==
        "{\n  \"a\": [\n    1.5,\n    {\n      \"b\": null\n    }\n  ]\n}");
  // Doubles in their shortest round-trip form (nlohmann alone writes 31.0,
  // -0.0, 0.0001 and 100000.0).
  CHECK(dump_json(0.1) == "0.1");
  CHECK(dump_json(31.0) == "31");
  CHECK(dump_json(1e-14) == "1e-14");
  CHECK(dump_json(0.0001) == "1e-04");
  CHECK(dump_json(1e5) == "1e+05");
  CHECK(dump_json(-0.0) == "-0");
  // Invalid UTF-8 is replaced, not an exception.
  CHECK(dump_json(std::string("bad\xff")) == "\"bad\xEF\xBF\xBD\"");
  CHECK(dump_json(Json{{std::string("k\xff"), 1}}, 0) == "{\"k\xEF\xBF\xBD\":1}");
}

TEST_CASE("JSON written reads back, and reader errors name the file, line and column") {
  Json v;
  v["a"] = Json::array({1, 2.5, "x", nullptr, false, Json::object(), 31.0});
  v["b"]["nested"] = -3;
  v["u"] = "é😀\t";
  for (int indent : {0, 2}) CHECK(parse_json(dump_json(v, indent)) == v);

  try {
    (void)parse_json("{\n  \"a\": 1,\n  \"b\": tru\n}", "x.json");
    FAIL("no error");
  } catch (const mambamt::InputError& e) {
    // The newline that ended the bad literal "tru".
    CHECK_THAT(e.what(), Catch::StartsWith("x.json:3:11: syntax error while parsing value - invalid literal"));
  }
  try {
    (void)parse_json("[1, 2", "short.json");
    FAIL("no error");
  } catch (const mambamt::InputError& e) {
    CHECK_THAT(e.what(), Catch::StartsWith("short.json:1:6: ") && Catch::Contains("unexpected end of input"));
  }
  try {
    (void)parse_json("[1e400]", "big.json");
    FAIL("no error");
  } catch (const mambamt::InputError& e) {
    CHECK(std::string(e.what()) == "big.json: number overflow parsing '1e400'");
  }
  CHECK_THROWS_AS(parse_json("[1] x"), mambamt::InputError);
  CHECK_THROWS_AS(parse_json("{\"a\": NaN}"), mambamt::InputError);

  mambamt::results::testing::TempDir dir;
  const std::string missing = (dir.path() / "nope.json").string();
  CHECK_THROWS_WITH(read_json_file(missing), Catch::Contains(missing));
  const std::string bad = (dir.path() / "bad.json").string();
  std::ofstream(bad) << "{\"a\": [1,]}\n";
  CHECK_THROWS_WITH(read_json_file(bad), Catch::StartsWith(bad + ":1:10: ") && Catch::Contains("unexpected ']'"));
}
