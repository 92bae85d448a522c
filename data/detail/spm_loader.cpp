#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>

#include "core/error.h"
#include "data/detail/spm_api.h"
#include "mambamt_spm_path.h"

namespace mambamt::data::detail {

namespace {

const char* const kShimName = "libmambamt_spm.so";

const SpmLibrary* load() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  if (const char* env = std::getenv("MAMBAMT_SPM_LIBRARY"); env && *env) candidates.emplace_back(env);
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path().parent_path() / "lib" / kShimName).string());
    candidates.push_back((exe.parent_path() / kShimName).string());
  }
  candidates.emplace_back(MAMBAMT_SPM_BUILD_PATH);
  candidates.emplace_back(kShimName);

  std::string tried;
  for (const auto& path : candidates) {
    if (path.find('/') != std::string::npos && !fs::exists(path, ec)) {
      tried += "\n  " + path + " (missing)";
      continue;
    }
    // RTLD_DEEPBIND: sentencepiece resolves its symbols (its protobuf-lite
    // copy above all) in its own library before the program's.
    void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!handle) {
      tried += "\n  " + path + " (" + ::dlerror() + ")";
      continue;
    }
    auto entry = reinterpret_cast<SpmEntry>(::dlsym(handle, kSpmEntry));
    if (!entry) {
      tried += "\n  " + path + " (no " + kSpmEntry + ")";
      continue;
    }
    return entry();
  }
  throw Error(std::string("cannot load the sentencepiece shim ") + kShimName +
              " (set MAMBAMT_SPM_LIBRARY to its path); tried:" + tried);
}

}  // namespace

const SpmLibrary& spm() {
  static const SpmLibrary* library = load();
  return *library;
}

}  // namespace mambamt::data::detail
