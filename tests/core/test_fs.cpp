// core/fs.h: which processes of this host count as alive (claims, running
// stores and temporary files of dead writers depend on it), and setting
// damaged files aside.
#include <catch2/catch.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>

#include "core/fs.h"
#include "test_util.h"

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

TEST_CASE("set_aside_unreadable keeps every damaged copy and tolerates a file already moved", "[core][fs]") {
  TempDir tmp;
  const std::string path = tmp.path("spm.model");
  write_text(path, "first");
  CHECK(core::set_aside_unreadable(path) == path + ".unreadable");
  write_text(path, "second");
  CHECK(core::set_aside_unreadable(path) == path + ".unreadable.1");
  CHECK(read_text(path + ".unreadable") == "first");
  CHECK(read_text(path + ".unreadable.1") == "second");
  CHECK_FALSE(std::filesystem::exists(path));
  // Gone already (another process repairing it moved it): nothing to do.
  CHECK(core::set_aside_unreadable(path) == "");
}
