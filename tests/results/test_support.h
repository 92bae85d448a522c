#pragma once
// Helpers shared by the results tests: test data location and scratch directories.
#include <cstdlib>
#include <filesystem>
#include <random>
#include <string>

namespace mambamt::results::testing {

// tests/results/data/<name>, found through MAMBAMT_SOURCE_DIR (set by CTest) or,
// when the binary runs by hand, next to this file.
inline std::string data_path(const std::string& name) {
  namespace fs = std::filesystem;
  if (const char* root = std::getenv("MAMBAMT_SOURCE_DIR")) {
    return (fs::path(root) / "tests" / "results" / "data" / name).string();
  }
  return (fs::path(__FILE__).parent_path() / "data" / name).string();
}

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    namespace fs = std::filesystem;
    std::random_device rd;
    for (int attempt = 0; attempt < 100; ++attempt) {
      fs::path p = fs::temp_directory_path() / ("mambamt_results_" + std::to_string(rd()));
      if (fs::create_directory(p)) {
        path_ = p;
        return;
      }
    }
    throw std::runtime_error("cannot create a temporary directory");
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mambamt::results::testing
