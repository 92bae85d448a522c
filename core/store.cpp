#include "core/store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>

#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"

namespace fs = std::filesystem;

namespace mambamt::core {

namespace {

constexpr const char* kFormat = "mambamt-store";
constexpr int64_t kFormatVersion = 1;

// The compound type of a metric point, in memory and in the file.
h5::Handle metric_type() {
  h5::Handle t(H5Tcreate(H5T_COMPOUND, sizeof(MetricPoint)));
  H5Tinsert(t.get(), "step", HOFFSET(MetricPoint, step), H5T_NATIVE_INT64);
  H5Tinsert(t.get(), "value", HOFFSET(MetricPoint, value), H5T_NATIVE_DOUBLE);
  H5Tinsert(t.get(), "time", HOFFSET(MetricPoint, time), H5T_NATIVE_DOUBLE);
  return t;
}

void write_status(h5::Group& g, const StoreStatus& s) {
  g.set_attr("state", std::string(to_string(s.state)));
  g.set_attr("attempts", s.attempts);
  g.set_attr("last_error", s.last_error);
  g.set_attr("host", s.host);
  g.set_attr("pid", s.pid);
  g.set_attr("job_id", s.job_id);
  g.set_attr("created", s.created);
  g.set_attr("started", s.started);
  g.set_attr("updated", s.updated);
  g.set_attr("finished", s.finished);
  g.set_attr("step", s.step);
  g.set_attr("total_steps", s.total_steps);
}

StoreStatus read_status(const h5::Group& g) {
  StoreStatus s;
  s.state = run_state_from(g.attr_string("state"));
  s.attempts = g.attr_int_or("attempts", 0);
  s.last_error = g.attr_string_or("last_error", "");
  s.host = g.attr_string_or("host", "");
  s.pid = g.attr_int_or("pid", 0);
  s.job_id = g.attr_string_or("job_id", "");
  s.created = g.attr_double_or("created", 0);
  s.started = g.attr_double_or("started", 0);
  s.updated = g.attr_double_or("updated", 0);
  s.finished = g.attr_double_or("finished", 0);
  s.step = g.attr_int_or("step", 0);
  s.total_steps = g.attr_int_or("total_steps", 0);
  return s;
}

std::vector<MetricPoint> read_metric(const h5::Group& metrics, const std::string& name) {
  h5::Dataset d = metrics.dataset(name);
  std::vector<MetricPoint> pts(d.shape().empty() ? 0 : d.elements());
  if (!pts.empty()) {
    h5::Handle t = metric_type();
    d.read_raw(t.get(), pts.data());
  }
  return pts;
}

// Walks results/ into scalars and tables ("text" holds strings).
void read_results(const h5::Group& g, const std::string& prefix, StoreSnapshot& snap) {
  for (auto& child : g.children()) {
    std::string path = prefix.empty() ? child : prefix + "/" + child;
    if (prefix.empty() && child == "text" && g.has_group(child)) {
      h5::Group t = g.group(child);
      for (auto& name : t.children()) snap.texts[name] = t.dataset(name).read_string();
      continue;
    }
    if (g.has_group(child)) {
      read_results(g.group(child), path, snap);
      continue;
    }
    h5::Dataset d = g.dataset(child);
    auto shape = d.shape();
    if (shape.empty()) {
      snap.scalars[path] = d.read_doubles().at(0);
    } else if (shape.size() == 2) {
      ResultTable t;
      t.values = d.read_doubles();
      t.rows = d.attr_strings("rows");
      t.columns = d.attr_strings("columns");
      snap.tables[path] = std::move(t);
    }
  }
}

}  // namespace

int64_t evaluation_version(const StoreSnapshot& store) {
  auto it = store.scalars.find("evaluation/version");
  return it != store.scalars.end() && std::isfinite(it->second) ? static_cast<int64_t>(it->second) : 0;
}

bool evaluated_by_older_version(const StoreSnapshot& store) {
  return store.status.state == RunState::completed && evaluation_version(store) < kEvaluationVersion;
}

int64_t result_defined_since(const std::string& path) {
  // Every result whose computation changed, with the version that changed it.
  static const std::map<std::string, int64_t> redefined = {
      {"alignment/aer", 3},  // the best layer's until 2, a layer chosen on the other half since
  };
  auto it = redefined.find(path);
  return it == redefined.end() ? 0 : it->second;
}

bool result_current(const StoreSnapshot& store, const std::string& path) {
  return evaluation_version(store) >= result_defined_since(path);
}

std::set<std::string> evaluation_parts_changed_since(int64_t version) {
  const std::set<std::string> every = {"test_sets",  "contrastive", "entities", "extrapolation",
                                       "efficiency", "explain",     "gates",    "alignment"};
  // The parts each version changed (the log of versions in core/store.h).
  static const std::map<int64_t, std::set<std::string>> changed = {
      {1, every},  // eval.max_examples counts test sentences: every part reads other sentences
      {2, {"alignment"}},
      {3, {"alignment"}},
      {4, {"alignment"}},
      {5, {"test_sets"}},
      {6, {"test_sets"}},
      {7, {"test_sets"}},
  };
  std::set<std::string> out;
  for (const auto& [v, parts] : changed)
    if (v > version) out.insert(parts.begin(), parts.end());
  return out;
}

const char* to_string(RunState s) {
  switch (s) {
    case RunState::pending: return "pending";
    case RunState::running: return "running";
    case RunState::completed: return "completed";
    case RunState::failed: return "failed";
    case RunState::interrupted: return "interrupted";
  }
  return "?";
}

RunState run_state_from(const std::string& s) {
  for (auto st : {RunState::pending, RunState::running, RunState::completed, RunState::failed, RunState::interrupted})
    if (s == to_string(st)) return st;
  throw Error("unknown run state \"" + s + "\"");
}

namespace {

// Writes a whole store to `file` (a new file).
void write_store(const std::string& file, const StoreSnapshot& d) {
  h5::File f = h5::File::create(file, /*truncate=*/true);
  h5::Group root = f.root();
  root.set_attr("format", kFormat);
  root.set_attr("format_version", kFormatVersion);
  root.set_attr("experiment_id", d.experiment_id);
  root.set_attr("name", d.name);
  root.set_attr("sweep", d.sweep);
  root.write_string("config", d.config);
  h5::Group status = root.create_group("status");
  write_status(status, d.status);
  h5::Group metrics = root.create_group("metrics");
  h5::Handle t = metric_type();
  for (auto& [name, pts] : d.metrics)
    metrics.write_raw(name, t.get(), {pts.size()}, pts.data(), /*chunked_extendible=*/true);
  h5::Group results = root.create_group("results");
  for (auto& [path, v] : d.scalars) results.write_scalar(path, v);
  for (auto& [path, tb] : d.tables) {
    h5::Dataset ds = results.write_doubles(path, tb.values, {tb.rows.size(), tb.columns.size()});
    ds.set_attr("rows", tb.rows);
    ds.set_attr("columns", tb.columns);
  }
  if (!d.texts.empty()) {
    h5::Group text = results.create_group("text");
    for (auto& [name, v] : d.texts) text.write_string(name, v);
  }
  h5::Group sys = root.create_group("system");
  for (auto& [k, v] : d.system) sys.set_attr(k, v);
  f.close();  // sealed (core/hdf5.h)
}

}  // namespace

ExperimentStore ExperimentStore::create(const std::string& path, const StoreIdentity& id) {
  if (fs::exists(path)) throw Error(path + ": store already exists");
  ExperimentStore st;
  st.path_ = path;
  st.data_.path = path;
  st.data_.experiment_id = id.experiment_id;
  st.data_.name = id.name;
  st.data_.sweep = id.sweep;
  st.data_.config = id.config;
  st.data_.status.created = st.data_.status.updated = unix_time();
  replace_file_atomic(path, [&](const std::string& tmp) { write_store(tmp, st.data_); });
  return st;
}

ExperimentStore ExperimentStore::open(const std::string& path) {
  ExperimentStore st;
  st.data_ = read(path);
  st.path_ = path;
  // Temporary files of commits that a crash interrupted.
  remove_stale_temp_files(fs::path(path).parent_path().string());
  return st;
}

namespace {

StoreSnapshot read_store(const std::string& path) {
  StoreSnapshot snap;
  snap.path = path;
  try {
    h5::File f = h5::File::open(path);
    h5::Group root = f.root();
    if (root.attr_string_or("format", "") != kFormat) throw InputError(path + ": not a mambamt store (no format attribute)");
    snap.experiment_id = root.attr_string_or("experiment_id", "");
    snap.name = root.attr_string_or("name", "");
    snap.sweep = root.attr_string_or("sweep", "");
    snap.config = root.dataset("config").read_string();
    snap.status = read_status(root.group("status"));
    h5::Group metrics = root.group("metrics");
    for (auto& name : metrics.children()) snap.metrics[name] = read_metric(metrics, name);
    if (root.has_group("results")) read_results(root.group("results"), "", snap);
    if (root.has_group("system")) {
      h5::Group sys = root.group("system");
      for (auto& a : sys.attr_names()) snap.system[a] = sys.attr_string(a);
    }
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(path + ": unreadable store: " + h5::after_file(path, e.what()));
  }
  return snap;
}

// A read in a child: the same read in this process then does what the
// child's did, and an error of the child's is thrown here again.
void read_in_child(const std::string& path) {
  try {
    read_store(path);
  } catch (const std::exception&) {
  }
}

// The child's timeout for reading an unsealed store (0: no child; `path`
// has a seal, or reads in a child are off).
double child_timeout_of(const std::string& path, const std::optional<FileIdentity>& id) {
  const double timeout = h5::unsealed_read_child_timeout(id ? static_cast<uint64_t>(id->size) : 0);
  return timeout > 0 && !h5::has_seal(path) ? timeout : 0;
}

// What read_ahead found: why each store could not be read ("" when it could).
std::mutex g_read_ahead_mutex;
std::map<std::string, std::pair<FileIdentity, std::string>> g_read_ahead;

}  // namespace

void ExperimentStore::read_ahead(const std::vector<std::string>& paths) {
  std::vector<std::string> unsealed;
  std::vector<FileIdentity> ids;
  for (const auto& path : paths) {
    const std::optional<FileIdentity> id = file_identity(path);
    if (id && h5::File::is_hdf5(path) && child_timeout_of(path, id) > 0) {
      unsealed.push_back(path);
      ids.push_back(*id);
    }
  }
  if (unsealed.empty()) return;
  const std::vector<std::string> why = h5::in_children(unsealed, read_in_child, [](const std::string& path) {
    const std::optional<FileIdentity> id = file_identity(path);
    return h5::unsealed_read_child_timeout(id ? static_cast<uint64_t>(id->size) : 0);
  });
  std::lock_guard<std::mutex> lock(g_read_ahead_mutex);
  for (size_t i = 0; i < unsealed.size(); ++i) g_read_ahead[unsealed[i]] = {ids[i], why[i]};
}

StoreSnapshot ExperimentStore::read(const std::string& path) {
  if (!fs::exists(path)) throw InputError(path + ": no such store");
  if (!h5::File::is_hdf5(path)) throw InputError(path + ": not an HDF5 file");
  const std::optional<FileIdentity> id = file_identity(path);
  if (const double timeout = child_timeout_of(path, id); timeout > 0) {
    // Read once where a crash or a loop of HDF5 on a damaged file costs only
    // the child (read_ahead's child, when the file is as it found it).
    std::optional<std::string> why;
    {
      std::lock_guard<std::mutex> lock(g_read_ahead_mutex);
      auto known = g_read_ahead.find(path);
      if (known != g_read_ahead.end() && id && known->second.first == *id) why = known->second.second;
    }
    if (!why) why = h5::in_child(path, [&] { read_in_child(path); }, timeout);
    if (!why->empty()) throw InputError(path + ": unreadable store: " + *why);
  }
  return read_store(path);
}

ExperimentStore::ExperimentStore(ExperimentStore&&) noexcept = default;
ExperimentStore& ExperimentStore::operator=(ExperimentStore&&) noexcept = default;

ExperimentStore::~ExperimentStore() {
  if (path_.empty() || !dirty_) return;
  try {
    commit();
  } catch (...) {
    // A destructor must not throw; what was committed before stays.
  }
}

void ExperimentStore::set_status(const StoreStatus& s) {
  data_.status = s;
  dirty_ = true;
}

void ExperimentStore::append_metric(const std::string& name, int64_t step, double value, double time) {
  if (name.empty() || name.find('/') != std::string::npos) throw Error("metric name \"" + name + "\" must be non-empty without '/'");
  data_.metrics[name].push_back({step, value, time > 0 ? time : unix_time()});
  dirty_ = true;
}

void ExperimentStore::set_scalar(const std::string& path, double value) {
  data_.scalars[path] = value;
  dirty_ = true;
}

void ExperimentStore::set_table(const std::string& path, const ResultTable& table) {
  if (table.values.size() != table.rows.size() * table.columns.size())
    throw Error("result table " + path + ": " + std::to_string(table.values.size()) + " values for " +
                std::to_string(table.rows.size()) + " rows x " + std::to_string(table.columns.size()) + " columns");
  data_.tables[path] = table;
  dirty_ = true;
}

void ExperimentStore::set_text(const std::string& name, const std::string& value) {
  data_.texts[name] = value;
  dirty_ = true;
}

void ExperimentStore::set_system(const std::map<std::string, std::string>& info) {
  for (auto& [k, v] : info) data_.system[k] = v;
  dirty_ = true;
}

void ExperimentStore::clear_results() {
  data_.scalars.clear();
  data_.tables.clear();
  data_.texts.clear();
  dirty_ = true;
}

bool ExperimentStore::has_pending() const { return dirty_; }

void ExperimentStore::commit() {
  if (!dirty_) return;
  data_.status.updated = unix_time();
  replace_file_atomic(path_, [&](const std::string& tmp) { write_store(tmp, data_); });
  dirty_ = false;
}

}  // namespace mambamt::core
