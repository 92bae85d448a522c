#pragma once
// Claims: which job works on an experiment, across jobs and hosts sharing one
// run directory. A claim is a file exp/<id>/claim.<generation> created with
// O_EXCL (atomic on local filesystems and NFSv3+). The highest generation is
// the current claim; its owner refreshes its modification time. A claim is
// stale when its owner is known dead (same host and the process is gone, or
// the same Slurm job came back after a requeue) or it was not refreshed for
// `timeout` seconds. Taking over a stale claim of generation g means creating
// generation g+1 with O_EXCL, so of several racing takers exactly one wins.
#include <cstdint>
#include <optional>
#include <string>

namespace mambamt::orchestrator {

struct ClaimOwner {
  std::string host;
  int64_t pid = 0;
  std::string job_id;        // scheduler job ("" outside a scheduler)
  int64_t restart_count = 0;  // SLURM_RESTART_COUNT of that job
  double time = 0;            // when claimed (Unix s)
};

// This process as a claim owner (job id and restart count from the caller).
ClaimOwner this_process(const std::string& job_id, int64_t restart_count);

struct ClaimInfo {
  int64_t generation = 0;
  ClaimOwner owner;
  double age = 0;  // seconds since the claim file was last refreshed
  std::string path;
};

// The current claim of an experiment directory, if any.
std::optional<ClaimInfo> current_claim(const std::string& exp_dir);

// Is this claim no longer held? (see the file comment)
bool claim_is_stale(const ClaimInfo& claim, const ClaimOwner& me, double timeout);

// Tries to claim `exp_dir` for `me`: succeeds when there is no claim or the
// current one is stale; returns the new claim's generation. A claim already
// held by `me` (same host, pid) is returned as is.
std::optional<int64_t> try_claim(const std::string& exp_dir, const ClaimOwner& me, double timeout);

// Refreshes our claim's time; false if we no longer hold it (someone took
// it over after it looked stale).
bool refresh_claim(const std::string& exp_dir, int64_t generation);

// Releases our claim (removes it if it is still ours).
void release_claim(const std::string& exp_dir, int64_t generation);

}  // namespace mambamt::orchestrator
