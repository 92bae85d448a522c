#include "core/fs.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace fs = std::filesystem;

namespace mambamt::core {

std::string temp_path_for(const std::string& path) {
  static std::atomic<long> counter{0};
  fs::path p(path);
  // The host is part of the name: on a shared filesystem a pid alone does not
  // say whose file it is.
  std::string name = "." + p.filename().string() + ".tmp." + host_name() + "." + std::to_string(::getpid()) + "." +
                     std::to_string(counter.fetch_add(1));
  return (p.parent_path() / name).string();
}

void sync_path(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(path + ": cannot open for sync: " + std::strerror(errno));
  // fsync on a directory opened read-only is allowed on Linux; EINVAL means the
  // filesystem does not support it, which we accept.
  if (::fsync(fd) != 0 && errno != EINVAL) {
    int e = errno;
    ::close(fd);
    throw Error(path + ": fsync failed: " + std::strerror(e));
  }
  ::close(fd);
}

void replace_file_atomic(const std::string& path, const std::function<void(const std::string& tmp)>& write) {
  std::string tmp = temp_path_for(path);
  try {
    write(tmp);
    sync_path(tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      throw Error(path + ": rename from " + tmp + " failed: " + std::strerror(errno));
  } catch (...) {
    std::error_code ec;
    fs::remove(tmp, ec);
    throw;
  }
  std::string dir = fs::path(path).parent_path().string();
  sync_path(dir.empty() ? "." : dir);
}

void write_file_atomic(const std::string& path, const std::string& content) {
  replace_file_atomic(path, [&](const std::string& tmp) {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(tmp + ": cannot create: " + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.close();
    if (!out) throw Error(tmp + ": write failed: " + std::strerror(errno));
  });
}

std::ifstream open_input_file(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path + ": is a directory, not a file");
  errno = 0;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path + ": cannot open file" + (errno != 0 ? std::string(": ") + std::strerror(errno) : ""));
  return in;
}

std::string read_file(const std::string& path) {
  std::ifstream in = open_input_file(path);
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw InputError(path + ": read error");
  return ss.str();
}

void require_run_directory(const std::string& dir) {
  const fs::path d(dir);
  if (!fs::is_directory(d)) throw InputError(dir + ": no such run directory");
  if (!fs::exists(d / "sweep.h5") && !fs::exists(d / "sweep.toml") && !fs::is_directory(d / "exp"))
    throw InputError(dir + ": not a run directory (no sweep.h5, sweep.toml or exp/)");
}

std::string set_aside_unreadable(const std::string& path) {
  std::string aside = path + ".unreadable";
  for (int n = 1; fs::exists(aside); ++n) aside = path + ".unreadable." + std::to_string(n);
  std::error_code ec;
  fs::rename(path, aside, ec);
  if (ec && !fs::exists(path)) return "";
  if (ec) throw InputError(path + ": cannot rename it to " + aside + ": " + ec.message());
  return aside;
}

FileIdentity file_identity(const struct stat& st) {
  return {static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<int64_t>(st.st_size),
          static_cast<int64_t>(st.st_mtim.tv_sec), static_cast<int64_t>(st.st_mtim.tv_nsec)};
}

std::optional<FileIdentity> file_identity(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return file_identity(st);
}

void make_dirs(const std::string& path) {
  std::error_code ec;
  fs::create_directories(path, ec);
  if (ec && !fs::is_directory(path)) throw Error(path + ": cannot create directory: " + ec.message());
}

std::string host_name() {
  char buf[256] = {0};
  if (::gethostname(buf, sizeof buf - 1) != 0) return "unknown";
  return buf;
}

double unix_time() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

bool process_alive(int64_t pid) {
  if (pid <= 0) return false;
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return true;  // no /proc: it exists
  // "pid (comm) S ...": the state follows the last ')'.
  const size_t close = stat.rfind(')');
  return close == std::string::npos || close + 2 >= stat.size() || stat[close + 2] != 'Z';
}

void remove_stale_temp_files(const std::string& dir) {
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string name = it->path().filename().string();
    size_t pos = name.find(".tmp.");
    if (name.empty() || name[0] != '.' || pos == std::string::npos) continue;
    // ".<file>.tmp.<host>.<pid>.<n>": parse from the end, hosts contain dots.
    std::string rest = name.substr(pos + 5);
    size_t last = rest.rfind('.');
    if (last == std::string::npos) continue;
    size_t before = rest.rfind('.', last - 1);
    if (before == std::string::npos) continue;
    std::string host = rest.substr(0, before);
    long pid = std::strtol(rest.c_str() + before + 1, nullptr, 10);
    if (pid <= 0 || host != host_name()) continue;
    // Only files of dead processes: a live writer may still rename its file.
    if (process_alive(pid)) continue;
    std::error_code rm_ec;
    fs::remove(it->path(), rm_ec);
  }
}

}  // namespace mambamt::core
