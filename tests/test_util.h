#pragma once
// Helpers shared by the tests of every folder.
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>

// A fresh directory under $TMPDIR, removed at scope exit (kept when the
// environment has MAMBAMT_KEEP_TMP=1, for debugging).
class TempDir {
 public:
  TempDir() {
    std::string base = std::filesystem::temp_directory_path().string() + "/mambamt-test-XXXXXX";
    if (!::mkdtemp(base.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = base;
  }
  ~TempDir() {
    const char* keep = std::getenv("MAMBAMT_KEEP_TMP");
    if (keep && std::string(keep) == "1") return;
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }

 private:
  std::string dir_;
};

inline void write_text(const std::string& path, const std::string& text) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct CommandResult {
  int code = -1;
  std::string output;  // stdout and stderr together
};

// Runs a shell command, capturing stdout and stderr together.
inline CommandResult run_shell(const std::string& cmd) {
  CommandResult r;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int st = ::pclose(p);
  r.code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return r;
}

inline std::string run_command(const std::string& cmd) { return run_shell(cmd).output; }

// The build directory of this test binary (<build>/tests/test_<folder>), for
// a test run by hand. Found at run time, not compiled in: an object that
// names its checkout's path would miss ccache in every other clone.
inline std::string test_build_dir() {
  return std::filesystem::read_symlink("/proc/self/exe").parent_path().parent_path().string();
}

// The repository root and the built binary: set by CTest for every test; by
// hand, the source tree CMake's cache names and <build>/bin/mambamt.
inline std::string source_dir() {
  if (const char* s = std::getenv("MAMBAMT_SOURCE_DIR")) return s;
  const std::string cache = test_build_dir() + "/CMakeCache.txt";
  std::ifstream in(cache);
  const std::string key = "CMAKE_HOME_DIRECTORY:INTERNAL=";
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key, 0) == 0) return line.substr(key.size());
  throw std::runtime_error("no MAMBAMT_SOURCE_DIR and no " + key + " in " + cache);
}

inline std::string mambamt_binary() {
  if (const char* s = std::getenv("MAMBAMT_BINARY")) return s;
  return test_build_dir() + "/bin/mambamt";
}

// An environment variable set (or, with `value` null, unset) for a scope;
// its earlier value, or its absence, comes back at scope exit.
class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, const char* value) : name_(name) {
    const char* old = std::getenv(name.c_str());
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value) ::setenv(name.c_str(), value, 1);
    else ::unsetenv(name.c_str());
  }
  ~ScopedEnv() {
    if (had_) ::setenv(name_.c_str(), old_.c_str(), 1);
    else ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_, old_;
  bool had_ = false;
};

// PATH with the stand-in `comet-score` of tests/train/comet first (COMET
// itself is a pip package the tests cannot install).
inline std::string path_with_comet_standin() {
  const char* path = std::getenv("PATH");
  return source_dir() + "/tests/train/comet" + (path ? ":" + std::string(path) : std::string());
}
