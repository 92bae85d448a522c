#pragma once
// Helpers of the data tests: a temporary directory, file writing, and the
// message of an expected InputError.
#include <stdlib.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>

#include "core/error.h"

namespace mambamt::data::testing {

// A fresh directory under $TMPDIR, removed at scope exit.
class ScratchDir {
 public:
  ScratchDir() {
    std::string base = std::filesystem::temp_directory_path().string() + "/mambamt-data-XXXXXX";
    if (!::mkdtemp(base.data())) throw std::runtime_error("mkdtemp failed");
    dir_ = base;
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& dir() const { return dir_; }
  std::string path(const std::string& rel) const { return dir_ + "/" + rel; }

 private:
  std::string dir_;
};

inline void write_file(const std::string& path, const std::string& text) {
  std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(path, std::ios::binary);
  out << text;
}

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// Runs f, which must throw InputError; returns its message.
template <typename F>
std::string input_error(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  FAIL("expected an InputError");
  return "";
}

inline std::string place(const std::string& file, long line) { return file + ":" + std::to_string(line) + ":"; }

}  // namespace mambamt::data::testing
