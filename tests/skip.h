#pragma once
// A test case that cannot run on this machine says so and returns: CTest
// counts a test whose output holds "MAMBAMT-SKIP:" as skipped, not passed
// (SKIP_REGULAR_EXPRESSION, cmake/CatchTags.cmake), and CI's summary line
// shows the count. Only for what the machine lacks (a GPU, an ISA); tools the
// test scripts install are required instead.
#include <catch2/catch.hpp>

#define MAMBAMT_SKIP(message)                 \
  do {                                        \
    WARN("MAMBAMT-SKIP: " << message);        \
    return;                                   \
  } while (false)
