#include "orchestrator/rundir.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include <spdlog/spdlog.h>

#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"

namespace fs = std::filesystem;

namespace mambamt::orchestrator {

RunDirectory run_directory_for(const core::GridConfig& grid) {
  return RunDirectory(grid.sweep.output_dir + "/" + grid.sweep.name);
}

namespace {

std::set<std::string> ids_of(const ExpandedGrid& g) {
  std::set<std::string> s;
  for (auto& p : g.points) s.insert(p.id);
  return s;
}

std::string list_some(const std::vector<std::string>& v) {
  std::string out;
  for (size_t i = 0; i < v.size() && i < 5; ++i) out += (i ? ", " : "") + v[i];
  if (v.size() > 5) out += ", ... (" + std::to_string(v.size()) + " in all)";
  return out;
}

}  // namespace

std::string grid_change(const ExpandedGrid& grid) {
  const std::string frozen = run_directory_for(grid.grid).frozen_grid();
  if (!fs::exists(frozen)) return "";
  const std::string old_text = core::read_file(frozen);
  if (old_text == grid.grid.text) return "";
  ExpandedGrid old = expand_grid(core::parse_grid(old_text, frozen));
  std::set<std::string> before = ids_of(old), after = ids_of(grid);
  std::vector<std::string> added, removed;
  for (auto& p : grid.points)
    if (!before.count(p.id)) added.push_back(p.id + " (" + p.name + ")");
  for (auto& p : old.points)
    if (!after.count(p.id)) removed.push_back(p.id + " (" + p.name + ")");
  if (added.empty() && removed.empty()) return "";
  std::string msg = grid.grid.source + ": the grid differs from the one this sweep was started with (" + frozen + ")";
  if (!added.empty()) msg += "; new points: " + list_some(added);
  if (!removed.empty()) msg += "; removed points: " + list_some(removed);
  return msg;
}

RunDirectory prepare_run_directory(const ExpandedGrid& grid, bool allow_grid_change) {
  RunDirectory dir = run_directory_for(grid.grid);
  core::make_dirs(dir.root() + "/exp");
  std::string frozen = dir.frozen_grid();
  if (!fs::exists(frozen)) {
    core::write_file_atomic(frozen, grid.grid.text);
    return dir;
  }
  if (core::read_file(frozen) == grid.grid.text) return dir;
  const std::string change = grid_change(grid);
  if (!change.empty() && !allow_grid_change)
    throw InputError(change +
                     ". Run with --allow-grid-change to add the new points (removed points' stores are left alone), "
                     "or use another sweep.name");
  // Same points (settings or comments changed), or a change that was allowed:
  // the new text becomes the frozen grid, the old one is kept beside it.
  int n = 1;
  while (fs::exists(frozen + "." + std::to_string(n))) ++n;
  fs::copy_file(frozen, frozen + "." + std::to_string(n));
  core::write_file_atomic(frozen, grid.grid.text);
  return dir;
}

SweepRecord sweep_record_for(const ExpandedGrid& g) {
  SweepRecord r;
  r.name = g.grid.sweep.name;
  r.design = g.grid.sweep.design;
  r.axes = g.axis_keys;
  r.base_values = g.base_values;
  for (auto& p : g.points) {
    r.ids.push_back(p.id);
    r.names.push_back(p.name);
    r.variants.push_back(p.variant);
    r.seeds.push_back(p.seed);
    r.axis_values.push_back(p.axis_values);
  }
  return r;
}

std::optional<SweepRecord> read_sweep_record(const std::string& path) {
  if (!fs::exists(path)) return std::nullopt;
  if (!core::h5::File::is_hdf5(path)) throw InputError(path + ": not an HDF5 file");
  SweepRecord r;
  try {
    core::h5::File f = core::h5::File::open(path);
    core::h5::Group root = f.root();
    if (root.attr_string_or("format", "") != "mambamt-sweep") throw InputError(path + ": not a mambamt sweep file");
    r.name = root.attr_string_or("name", "");
    r.state = root.attr_string_or("state", "");
    r.started = root.attr_double_or("started", 0);
    r.updated = root.attr_double_or("updated", 0);
    r.requeues = root.attr_int_or("requeues", 0);
    r.design = root.attr_string_or("design", "cartesian");
    if (root.has_attr("job_ids")) r.job_ids = root.attr_strings("job_ids");
    core::h5::Group pts = root.group("points");
    r.ids = pts.dataset("id").read_strings();
    r.names = pts.dataset("name").read_strings();
    r.variants = pts.dataset("variant").read_strings();
    r.seeds = pts.dataset("seed").read_ints();
    r.axes = pts.has_attr("axes") ? pts.attr_strings("axes") : std::vector<std::string>{};
    r.base_values = pts.has_attr("base_values") ? pts.attr_strings("base_values") : std::vector<std::string>{};
    std::vector<std::string> flat = r.axes.empty() ? std::vector<std::string>{} : pts.dataset("axis_values").read_strings();
    for (size_t i = 0; i < r.ids.size(); ++i) {
      std::vector<std::string> row;
      for (size_t a = 0; a < r.axes.size(); ++a) row.push_back(flat.at(i * r.axes.size() + a));
      r.axis_values.push_back(row);
    }
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(path + ": unreadable sweep file: " + core::h5::after_file(path, e.what()));
  }
  return r;
}

namespace {

void write_record_file(const std::string& path, const SweepRecord& r) {
  core::replace_file_atomic(path, [&](const std::string& tmp) {
    core::h5::File f = core::h5::File::create(tmp, true);
    core::h5::Group root = f.root();
    root.set_attr("format", "mambamt-sweep");
    root.set_attr("name", r.name);
    root.set_attr("state", r.state);
    root.set_attr("started", r.started);
    root.set_attr("updated", core::unix_time());
    root.set_attr("requeues", r.requeues);
    root.set_attr("design", r.design);
    root.set_attr("job_ids", r.job_ids);
    core::h5::Group pts = root.create_group("points");
    pts.write_strings("id", r.ids);
    pts.write_strings("name", r.names);
    pts.write_strings("variant", r.variants);
    pts.write_ints("seed", r.seeds);
    pts.set_attr("axes", r.axes);
    pts.set_attr("base_values", r.base_values);
    if (!r.axes.empty()) {
      std::vector<std::string> flat;
      for (auto& row : r.axis_values) flat.insert(flat.end(), row.begin(), row.end());
      core::h5::Handle t(H5Tcopy(H5T_C_S1));
      H5Tset_size(t.get(), H5T_VARIABLE);
      H5Tset_cset(t.get(), H5T_CSET_UTF8);
      std::vector<const char*> ptrs;
      for (auto& s : flat) ptrs.push_back(s.c_str());
      pts.write_raw("axis_values", t.get(), {r.ids.size(), r.axes.size()}, ptrs.data());
    }
    f.close();  // sealed (core/hdf5.h)
  });
}

// A lock file serialising read-modify-write of sweep.h5 between coordinators
// of different jobs; a lock older than 60 s is from a dead process.
class FileLock {
 public:
  explicit FileLock(std::string path) : path_(std::move(path)) {
    for (int i = 0; i < 6000; ++i) {
      int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd >= 0) {
        ::close(fd);
        held_ = true;
        return;
      }
      std::error_code ec;
      auto t = fs::last_write_time(path_, ec);
      if (!ec && fs::file_time_type::clock::now() - t > std::chrono::seconds(60)) fs::remove(path_, ec);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    throw Error(path_ + ": could not take the lock for a minute");
  }
  ~FileLock() {
    if (held_) ::unlink(path_.c_str());
  }

 private:
  std::string path_;
  bool held_ = false;
};

}  // namespace

void write_sweep_record(const std::string& path, const SweepRecord& record) {
  FileLock lock(path + ".lock");
  write_record_file(path, record);
}

void update_sweep_record(const std::string& path, const SweepRecord& fresh,
                         const std::function<void(SweepRecord&)>& edit) {
  FileLock lock(path + ".lock");
  SweepRecord r = fresh;
  try {
    if (auto old = read_sweep_record(path)) {
      // Keep the history that other jobs recorded; the points are the grid's.
      r.started = old->started;
      r.job_ids = old->job_ids;
      r.requeues = old->requeues;
      r.state = old->state;
    }
  } catch (const InputError& e) {
    // An unreadable sweep file (damaged on disk: ours are written atomically)
    // is kept aside and rewritten from the grid; its history (jobs, requeues)
    // starts again.
    const std::string aside = core::set_aside_unreadable(path);
    spdlog::warn("{}; set aside as {} and written again from the grid", e.what(), aside);
  }
  if (r.started == 0) r.started = core::unix_time();
  edit(r);
  write_record_file(path, r);
}

PointState point_state(const RunDirectory& dir, const GridPoint& p, int64_t retries, bool retry_failed) {
  PointState s;
  std::string path = dir.store_path(p.id);
  if (!fs::exists(path)) return s;
  try {
    const core::StoreSnapshot snap = core::ExperimentStore::read(path);
    s.status = snap.status;
    s.evaluation_version = core::evaluation_version(snap);
  } catch (const InputError& e) {
    // A store that cannot be read is never overwritten by the sweep: a person
    // has to look at it.
    s.unreadable = e.what();
    s.need = Need::failed_final;
    return s;
  }
  switch (s.status->state) {
    case core::RunState::completed: s.need = Need::done; break;
    case core::RunState::failed:
      s.need = (retry_failed || s.status->attempts < 1 + retries) && p.valid() ? Need::run : Need::failed_final;
      break;
    default: s.need = p.valid() ? Need::run : Need::failed_final; break;
  }
  return s;
}

}  // namespace mambamt::orchestrator
