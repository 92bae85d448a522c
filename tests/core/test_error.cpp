#include <catch2/catch.hpp>
#include "core/error.h"

TEST_CASE("located() formats file, line and column", "[core]") {
  CHECK(mambamt::located("a.toml", 3, 7, "bad") == "a.toml:3:7: bad");
  CHECK(mambamt::located("a.toml", 3, 0, "bad") == "a.toml:3: bad");
  CHECK(mambamt::located("a.toml", 0, 0, "bad") == "a.toml: bad");
}
