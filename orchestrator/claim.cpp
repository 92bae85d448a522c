#include "orchestrator/claim.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"

namespace fs = std::filesystem;

namespace mambamt::orchestrator {

namespace {

std::string claim_path(const std::string& dir, int64_t gen) { return dir + "/claim." + std::to_string(gen); }

std::string serialize(const ClaimOwner& o) {
  std::ostringstream out;
  out << "host " << o.host << "\npid " << o.pid << "\njob " << o.job_id << "\nrestart " << o.restart_count
      << "\ntime " << std::fixed << o.time << "\n";
  return out.str();
}

ClaimOwner parse(const std::string& text) {
  ClaimOwner o;
  std::istringstream in(text);
  std::string key, line;
  while (std::getline(in, line)) {
    size_t sp = line.find(' ');
    if (sp == std::string::npos) continue;
    key = line.substr(0, sp);
    std::string v = line.substr(sp + 1);
    try {
      if (key == "host") o.host = v;
      else if (key == "pid") o.pid = std::stoll(v);
      else if (key == "job") o.job_id = v;
      else if (key == "restart") o.restart_count = std::stoll(v);
      else if (key == "time") o.time = std::stod(v);
    } catch (...) {
      // A half-written claim reads as an owner we cannot recognise; its age decides.
    }
  }
  return o;
}

}  // namespace

ClaimOwner this_process(const std::string& job_id, int64_t restart_count) {
  ClaimOwner o;
  o.host = core::host_name();
  o.pid = ::getpid();
  o.job_id = job_id;
  o.restart_count = restart_count;
  o.time = core::unix_time();
  return o;
}

std::optional<ClaimInfo> current_claim(const std::string& exp_dir) {
  std::optional<ClaimInfo> best;
  std::error_code ec;
  for (auto it = fs::directory_iterator(exp_dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.rfind("claim.", 0) != 0) continue;
    std::string g = n.substr(6);
    if (g.empty() || g.find_first_not_of("0123456789") != std::string::npos) continue;
    int64_t gen = std::stoll(g);
    if (best && best->generation >= gen) continue;
    ClaimInfo info;
    info.generation = gen;
    info.path = it->path().string();
    struct stat st;
    if (::stat(info.path.c_str(), &st) != 0) continue;  // released meanwhile
    double mtime = static_cast<double>(st.st_mtim.tv_sec) + st.st_mtim.tv_nsec * 1e-9;
    info.age = core::unix_time() - mtime;
    try {
      info.owner = parse(core::read_file(info.path));
    } catch (const InputError&) {
      continue;
    }
    best = info;
  }
  return best;
}

bool claim_is_stale(const ClaimInfo& c, const ClaimOwner& me, double timeout) {
  if (c.age > timeout) return true;
  // The same process: ours, not stale.
  if (c.owner.host == me.host && c.owner.pid == me.pid) return false;
  // On this host, a dead process no longer holds anything.
  if (c.owner.host == me.host && c.owner.pid > 0 && !core::process_alive(c.owner.pid)) return true;
  // Our own scheduler job, from before a requeue: its processes are gone.
  if (!me.job_id.empty() && c.owner.job_id == me.job_id && c.owner.restart_count < me.restart_count) return true;
  return false;
}

std::optional<int64_t> try_claim(const std::string& exp_dir, const ClaimOwner& me, double timeout) {
  core::make_dirs(exp_dir);
  for (int attempt = 0; attempt < 8; ++attempt) {
    auto cur = current_claim(exp_dir);
    int64_t gen = 1;
    if (cur) {
      if (cur->owner.host == me.host && cur->owner.pid == me.pid) return cur->generation;
      if (!claim_is_stale(*cur, me, timeout)) return std::nullopt;
      gen = cur->generation + 1;
    }
    std::string path = claim_path(exp_dir, gen);
    int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
      if (errno == EEXIST) continue;  // someone else won this generation: look again
      throw Error(path + ": cannot create claim: " + std::strerror(errno));
    }
    std::string text = serialize(me);
    bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::fsync(fd);
    ::close(fd);
    if (!ok) {
      ::unlink(path.c_str());
      throw Error(path + ": cannot write claim");
    }
    // Older generations are history now.
    for (int64_t g = gen - 1; g >= 1 && g >= gen - 4; --g) ::unlink(claim_path(exp_dir, g).c_str());
    return gen;
  }
  return std::nullopt;
}

bool refresh_claim(const std::string& exp_dir, int64_t generation) {
  auto cur = current_claim(exp_dir);
  if (!cur || cur->generation != generation) return false;
  return ::utimensat(AT_FDCWD, cur->path.c_str(), nullptr, 0) == 0;
}

void release_claim(const std::string& exp_dir, int64_t generation) {
  auto cur = current_claim(exp_dir);
  if (cur && cur->generation == generation) ::unlink(cur->path.c_str());
}

}  // namespace mambamt::orchestrator
