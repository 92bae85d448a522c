#pragma once
// The run directory of a sweep (docs/STORE.md): the frozen grid, the sweep
// file with the expected points, and the decision of what still has to run.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/store.h"
#include "orchestrator/grid.h"

namespace mambamt::orchestrator {

class RunDirectory {
 public:
  explicit RunDirectory(std::string root) : root_(std::move(root)) {}
  const std::string& root() const { return root_; }
  std::string exp_dir(const std::string& id) const { return root_ + "/exp/" + id; }
  std::string store_path(const std::string& id) const { return exp_dir(id) + "/store.h5"; }
  std::string frozen_grid() const { return root_ + "/sweep.toml"; }
  std::string sweep_file() const { return root_ + "/sweep.h5"; }

 private:
  std::string root_;
};

// The run directory of a grid: sweep.output_dir/sweep.name.
RunDirectory run_directory_for(const core::GridConfig& grid);

// How the grid's points differ from those of the run directory's frozen grid:
// "<grid>: the grid differs from the one this sweep was started with
// (<frozen>); new points: ...; removed points: ...", or "" when the directory
// has no frozen grid or the same points (settings or comments may differ).
std::string grid_change(const ExpandedGrid& grid);

// Creates the run directory or checks it against the grid. A directory whose
// frozen grid expands to other points is refused (InputError naming both
// files and the points added/removed) unless `allow_grid_change`; then the
// new grid is frozen (the old copy kept as sweep.toml.<n>), new points are
// added and removed points' stores are left alone.
RunDirectory prepare_run_directory(const ExpandedGrid& grid, bool allow_grid_change);

// sweep.h5: what the coordinator records about the sweep.
struct SweepRecord {
  std::string name;
  std::string state = "running";  // running, interrupted, completed
  double started = 0;
  double updated = 0;
  std::vector<std::string> job_ids;
  int64_t requeues = 0;
  std::string design;
  // /points
  std::vector<std::string> ids, names, variants;
  std::vector<int64_t> seeds;
  std::vector<std::string> axes, base_values;
  std::vector<std::vector<std::string>> axis_values;  // [point][axis]
};

SweepRecord sweep_record_for(const ExpandedGrid& grid);
std::optional<SweepRecord> read_sweep_record(const std::string& path);
// Atomic replace, serialised with other coordinators by a lock file.
void write_sweep_record(const std::string& path, const SweepRecord& record);
// Read-modify-write under the lock: `edit` changes the record in place.
void update_sweep_record(const std::string& path, const SweepRecord& fresh,
                         const std::function<void(SweepRecord&)>& edit);

// What a point needs now.
enum class Need { run, done, failed_final };

struct PointState {
  Need need = Need::run;
  std::optional<core::StoreStatus> status;  // absent: no store yet
  std::string unreadable;                   // the store exists but cannot be read
  // results/evaluation/version of the store (core::kEvaluationVersion of the
  // evaluation that wrote it; 0 when it has none).
  int64_t evaluation_version = 0;
};

PointState point_state(const RunDirectory& dir, const GridPoint& p, int64_t retries, bool retry_failed);

}  // namespace mambamt::orchestrator
