#include "core/signals.h"

#include <signal.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csignal>

#include "core/error.h"

namespace mambamt::core {
namespace {

// Written from the handler: lock-free atomics only (a plain store/fetch_add is
// async-signal-safe when the type is always lock-free).
static_assert(std::atomic<int>::is_always_lock_free);
std::atomic<int> g_first_signal{0};
std::atomic<int> g_count{0};
std::atomic<int> g_checkpoint_signo{0};

// Dispositions saved at installation, restored by uninstall (not touched by the handler).
struct Saved {
  int signo = 0;
  struct sigaction action {};
};
Saved g_saved[2];

extern "C" void on_stop_signal(int signo) {
  int expected = 0;
  g_first_signal.compare_exchange_strong(expected, signo);
  g_count.fetch_add(1);
}

struct NamedSignal {
  const char* name;
  int signo;
};
constexpr NamedSignal kSignals[] = {
    {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"TERM", SIGTERM}, {"INT", SIGINT}, {"HUP", SIGHUP}};

}  // namespace

int signal_number(const std::string& name) {
  std::string n = name;
  std::transform(n.begin(), n.end(), n.begin(), [](unsigned char c) { return std::toupper(c); });
  if (n.rfind("SIG", 0) == 0) n = n.substr(3);
  for (const auto& s : kSignals)
    if (n == s.name) return s.signo;
  throw InputError("unknown checkpoint signal '" + name + "': expected one of USR1, USR2, TERM, INT, HUP");
}

std::string signal_name(int signo) {
  for (const auto& s : kSignals)
    if (s.signo == signo) return s.name;
  return "SIG" + std::to_string(signo);
}

void install_stop_handlers(int checkpoint_signo) {
  bool known = false;
  for (const auto& s : kSignals) known = known || s.signo == checkpoint_signo;
  if (!known) throw InputError("checkpoint signal " + std::to_string(checkpoint_signo) + " is not one of USR1, USR2, TERM, INT, HUP");
  uninstall_stop_handlers();

  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  const int signos[2] = {checkpoint_signo, SIGTERM};
  for (int i = 0; i < 2; ++i) {
    if (i == 1 && checkpoint_signo == SIGTERM) break;
    g_saved[i].signo = signos[i];
    if (::sigaction(signos[i], &sa, &g_saved[i].action) != 0)
      throw Error("sigaction(" + signal_name(signos[i]) + ") failed");
  }
  g_checkpoint_signo.store(checkpoint_signo);
  reset_stop_request();
}

void install_stop_handlers(const std::string& checkpoint_signal) {
  install_stop_handlers(signal_number(checkpoint_signal));
}

void uninstall_stop_handlers() {
  for (auto& s : g_saved) {
    if (s.signo != 0) ::sigaction(s.signo, &s.action, nullptr);
    s = Saved{};
  }
  g_checkpoint_signo.store(0);
}

bool stop_requested() { return g_first_signal.load() != 0; }

int stop_signal() { return g_first_signal.load(); }

bool checkpoint_requested() {
  const int first = g_first_signal.load();
  return first != 0 && first == g_checkpoint_signo.load();
}

int stop_signal_count() { return g_count.load(); }

void reset_stop_request() {
  g_first_signal.store(0);
  g_count.store(0);
}

int installed_checkpoint_signal() { return g_checkpoint_signo.load(); }

}  // namespace mambamt::core
