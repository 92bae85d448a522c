// Stop handlers: the checkpoint signal and SIGTERM set the flag instead of
// killing the process, whether raised in-process or sent by another process.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "core/error.h"
#include "core/signals.h"

using namespace mambamt::core;

namespace {

// Installs for one test and puts the old dispositions back afterwards.
struct Handlers {
  explicit Handlers(const std::string& sig) { install_stop_handlers(sig); }
  ~Handlers() {
    uninstall_stop_handlers();
    reset_stop_request();
  }
};

// Signals sent by another process arrive asynchronously.
bool wait_for_stop(std::chrono::milliseconds limit = std::chrono::milliseconds(5000)) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (!stop_requested() && std::chrono::steady_clock::now() < end)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  return stop_requested();
}

// Forks; the child runs `body` and _exits with its result. Returns the wait status.
template <class F>
int in_child(F body) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(body());
  int status = 0;
  ::waitpid(pid, &status, 0);
  return status;
}

}  // namespace

TEST_CASE("signal names map to numbers and back") {
  CHECK(signal_number("USR2") == SIGUSR2);
  CHECK(signal_number("sigusr1") == SIGUSR1);
  CHECK(signal_number("SIGTERM") == SIGTERM);
  CHECK(signal_number("int") == SIGINT);
  CHECK(signal_number("HUP") == SIGHUP);
  CHECK(signal_name(SIGUSR2) == "USR2");
  CHECK(signal_name(SIGKILL) == "SIG" + std::to_string(SIGKILL));
  CHECK_THROWS_AS(signal_number("KILL"), mambamt::InputError);
  CHECK_THROWS_WITH(signal_number("USR3"), Catch::Contains("USR1, USR2, TERM, INT, HUP"));
  CHECK_THROWS_AS(install_stop_handlers(SIGKILL), mambamt::InputError);
}

TEST_CASE("raising the checkpoint signal sets the flag") {
  Handlers h("USR2");
  CHECK(installed_checkpoint_signal() == SIGUSR2);
  CHECK_FALSE(stop_requested());
  CHECK(stop_signal() == 0);
  ::raise(SIGUSR2);
  CHECK(stop_requested());
  CHECK(stop_signal() == SIGUSR2);
  CHECK(checkpoint_requested());
  CHECK(stop_signal_count() == 1);
  // A later SIGTERM counts but does not change which signal came first.
  ::raise(SIGTERM);
  CHECK(stop_signal() == SIGUSR2);
  CHECK(stop_signal_count() == 2);
  reset_stop_request();
  CHECK_FALSE(stop_requested());
  CHECK(stop_signal() == 0);
  CHECK(stop_signal_count() == 0);
}

TEST_CASE("SIGTERM is a stop request but not a checkpoint request") {
  Handlers h("USR2");
  ::raise(SIGTERM);
  CHECK(stop_requested());
  CHECK(stop_signal() == SIGTERM);
  CHECK_FALSE(checkpoint_requested());
}

TEST_CASE("the checkpoint signal is configurable") {
  for (const char* name : {"USR1", "HUP", "INT"}) {
    Handlers h(name);
    ::raise(signal_number(name));
    CHECK(stop_signal() == signal_number(name));
    CHECK(checkpoint_requested());
  }
  // With TERM as the checkpoint signal, TERM requests a checkpoint.
  Handlers h("TERM");
  ::raise(SIGTERM);
  CHECK(checkpoint_requested());
}

TEST_CASE("a signal sent by another process sets the flag") {
  Handlers h("USR2");
  const pid_t parent = ::getpid();
  const int status = in_child([parent] { return ::kill(parent, SIGUSR2) == 0 ? 0 : 1; });
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  CHECK(wait_for_stop());
  CHECK(stop_signal() == SIGUSR2);
}

TEST_CASE("SIGTERM from kill(1) sets the flag") {
  Handlers h("USR2");
  const std::string cmd = "kill -TERM " + std::to_string(::getpid());
  REQUIRE(std::system(cmd.c_str()) == 0);
  CHECK(wait_for_stop());
  CHECK(stop_signal() == SIGTERM);
}

TEST_CASE("the handled signal does not kill the process, unhandled it would") {
  // Without handlers USR2's default action terminates the child: the check below is meaningful.
  int status = in_child([] {
    ::signal(SIGUSR2, SIG_DFL);
    ::raise(SIGUSR2);
    return 0;
  });
  CHECK(WIFSIGNALED(status));
  CHECK(WTERMSIG(status) == SIGUSR2);

  for (int signo : {SIGUSR2, SIGTERM}) {
    status = in_child([signo] {
      install_stop_handlers(SIGUSR2);
      ::kill(::getpid(), signo);
      return stop_signal() == signo ? 0 : 3;
    });
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
}

TEST_CASE("uninstall restores the previous disposition") {
  struct sigaction before {};
  ::sigaction(SIGUSR2, nullptr, &before);
  {
    Handlers h("USR2");
    struct sigaction during {};
    ::sigaction(SIGUSR2, nullptr, &during);
    CHECK(during.sa_handler != before.sa_handler);
    CHECK((during.sa_flags & SA_RESTART) != 0);
  }
  struct sigaction after {};
  ::sigaction(SIGUSR2, nullptr, &after);
  CHECK(after.sa_handler == before.sa_handler);
  CHECK(installed_checkpoint_signal() == 0);
}
