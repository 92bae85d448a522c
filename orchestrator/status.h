#pragma once
// `mambamt status RUN_DIR`: counts by state, one line per experiment, ETA.
// Reads only (sweep.h5, stores, claims), so it works while the sweep runs.
#include <string>

namespace mambamt::orchestrator {

std::string status_report(const std::string& run_dir);

}  // namespace mambamt::orchestrator
