// core/fs.h: which processes of this host count as alive (claims, running
// stores and temporary files of dead writers depend on it).
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include "core/fs.h"

using namespace mambamt;

TEST_CASE("process_alive: this process and its parent live, but not pid 0, a zombie or a reaped child") {
  CHECK(core::process_alive(::getpid()));
  CHECK(core::process_alive(::getppid()));
  CHECK_FALSE(core::process_alive(0));
  CHECK_FALSE(core::process_alive(-5));
  // A child that exits and is not reaped stays a zombie until waitpid.
  const pid_t child = ::fork();
  if (child == 0) ::_exit(0);
  REQUIRE(child > 0);
  bool dead = false;
  for (int i = 0; i < 200 && !dead; ++i) {
    dead = !core::process_alive(child);
    if (!dead) ::usleep(10000);
  }
  CHECK(dead);
  CHECK(::kill(child, 0) == 0);  // the zombie is still there
  ::waitpid(child, nullptr, 0);
  CHECK_FALSE(core::process_alive(child));  // reaped: gone
}
