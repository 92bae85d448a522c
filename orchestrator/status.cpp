#include "orchestrator/status.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iomanip>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"
#include "core/store.h"
#include "orchestrator/claim.h"
#include "orchestrator/rundir.h"

namespace fs = std::filesystem;

namespace mambamt::orchestrator {

namespace {

std::string duration(double s) {
  if (!std::isfinite(s) || s < 0) return "-";
  long t = static_cast<long>(s + 0.5);
  std::ostringstream o;
  if (t >= 3600) o << t / 3600 << "h" << std::setw(2) << std::setfill('0') << (t % 3600) / 60 << "m";
  else if (t >= 60) o << t / 60 << "m" << std::setw(2) << std::setfill('0') << t % 60 << "s";
  else o << t << "s";
  return o.str();
}

// The last validation number worth showing: BLEU if validated by it, else loss.
std::string last_validation(const core::StoreSnapshot& s) {
  for (const char* name : {"valid_bleu", "valid_chrf", "valid_loss"}) {
    auto it = s.metrics.find(name);
    if (it == s.metrics.end() || it->second.empty()) continue;
    std::ostringstream o;
    o << std::string(name).substr(6) << " " << std::fixed << std::setprecision(3) << it->second.back().value;
    return o.str();
  }
  return "-";
}

}  // namespace

std::string status_report(const std::string& run_dir) {
  core::require_run_directory(run_dir);
  RunDirectory dir(run_dir);
  std::vector<std::string> ids, names;
  // Reads only: a sweep file that does not read is reported, and the
  // experiments are listed from exp/ (the coordinator sets it aside).
  std::optional<SweepRecord> record;
  std::string record_error;
  try {
    record = read_sweep_record(dir.sweep_file());
  } catch (const InputError& e) {
    record_error = e.what();
  }
  if (record) {
    ids = record->ids;
    names = record->names;
    std::set<int64_t> seeds(record->seeds.begin(), record->seeds.end());
    if (seeds.size() > 1)
      for (size_t i = 0; i < names.size(); ++i) names[i] += "  seed " + std::to_string(record->seeds[i]);
  } else {
    // No readable sweep file (a run directory of another tool version, one
    // being created, or a damaged file): list what is there.
    std::error_code ec;
    for (auto it = fs::directory_iterator(run_dir + "/exp", ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
      ids.push_back(it->path().filename().string());
      names.push_back("");
    }
    std::sort(ids.begin(), ids.end());
  }

  std::map<std::string, int> counts;
  std::ostringstream rows;
  double now = core::unix_time();
  double done_seconds = 0;
  int done_n = 0;
  double remaining_work = 0;  // seconds of running experiments still to go
  int pending = 0, running = 0;
  int older_evaluation = 0;  // completed, by an evaluation older than this mambamt's
  int unsealed = 0;          // stores read unchecked: no seal (h5py, a mambamt from before it)
  rows << std::left << std::setw(14) << "id" << std::setw(12) << "state" << std::right << std::setw(15) << "step"
       << "  " << std::left << std::setw(18) << "validation" << std::setw(9) << "attempts" << std::setw(16) << "host"
       << "point\n";
  std::vector<std::string> paths;
  for (const auto& id : ids) paths.push_back(dir.store_path(id));
  core::ExperimentStore::read_ahead(paths);
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string& id = ids[i];
    std::string path = dir.store_path(id);
    std::string state = "pending", step = "-", valid = "-", attempts = "0", host = "-", name = names[i];
    if (fs::exists(path)) {
      try {
        core::StoreSnapshot s = core::ExperimentStore::read(path);
        auto& st = s.status;
        state = core::to_string(st.state);
        if (name.empty()) name = s.name;
        // The attention layers as built (the store's text model.attention).
        if (auto it = s.texts.find("model.attention"); it != s.texts.end()) name += "  attention " + it->second;
        step = std::to_string(st.step) + "/" + std::to_string(st.total_steps);
        valid = last_validation(s);
        attempts = std::to_string(st.attempts);
        host = st.host.empty() ? "-" : st.host;
        if (st.state == core::RunState::running) {
          // A running store whose claim is gone or stale belongs to a dead job.
          auto claim = current_claim(dir.exp_dir(id));
          ClaimOwner me = this_process("", 0);
          if (!claim || claim_is_stale(*claim, me, 1e18) || claim->age > 3600) state = "running?";
          double elapsed = now - st.started;
          if (st.step > 0 && st.total_steps > st.step) remaining_work += elapsed / st.step * (st.total_steps - st.step);
          ++running;
        }
        if (core::evaluated_by_older_version(s)) ++older_evaluation;
        if (!core::h5::has_seal(path)) ++unsealed;
        if (st.state == core::RunState::completed && st.finished > st.started && st.started > 0) {
          done_seconds += st.finished - st.started;
          ++done_n;
        }
        if (st.state == core::RunState::pending || st.state == core::RunState::interrupted) ++pending;
        if (st.state == core::RunState::failed && !st.last_error.empty()) {
          std::string e = st.last_error.substr(0, 120);
          name += "\n" + std::string(16, ' ') + "error: " + e;
        }
      } catch (const InputError& e) {
        state = "unreadable";
        name += "\n" + std::string(16, ' ') + e.what();
      }
    } else {
      ++pending;
    }
    counts[state]++;
    rows << std::left << std::setw(14) << id << std::setw(12) << state << std::right << std::setw(15) << step << "  "
         << std::left << std::setw(18) << valid << std::setw(9) << attempts << std::setw(16) << host << name << "\n";
  }

  std::ostringstream out;
  out << "sweep " << (record ? record->name : fs::path(run_dir).filename().string()) << " (" << run_dir << ")";
  if (record) out << ": " << record->state << ", " << record->job_ids.size() << " job(s), " << record->requeues << " requeue(s)";
  if (!record_error.empty()) out << "\n" << record_error << " (experiments listed from exp/)";
  out << "\n" << ids.size() << " experiments:";
  for (auto& [state, n] : counts) out << " " << n << " " << state;
  out << "\n";
  if (older_evaluation > 0)
    out << older_evaluation
        << " completed experiment(s) evaluated by an older mambamt: `mambamt sweep GRID --reevaluate` evaluates "
           "them again\n";
  if (unsealed > 0) out << core::h5::unsealed_advice(unsealed, run_dir) << "\n";
  if (pending + running > 0) {
    double mean = done_n ? done_seconds / done_n : NAN;
    double lanes = std::max(1, running);
    double eta = (remaining_work + (std::isfinite(mean) ? pending * mean : NAN)) / lanes;
    out << "ETA " << duration(eta) << " at the current parallelism (" << running << " running"
        << (done_n ? ", mean " + duration(mean) + " per experiment" : std::string(", no experiment finished yet")) << ")\n";
  }
  out << "\n" << rows.str();
  return out.str();
}

}  // namespace mambamt::orchestrator
