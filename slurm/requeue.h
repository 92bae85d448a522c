#pragma once
// What a stop signal means and whether the sweep asks to come back.
//
// The batch script asks Slurm for the checkpoint signal `lead` seconds before
// the time limit (`#SBATCH --signal=B:USR2@<lead>`) and exports the same lead as
// MAMBAMT_SIGNAL_LEAD. On the signal every rank checkpoints; the coordinator
// (rank 0 only) then records the sweep as interrupted and, as its very last act,
// calls request_requeue(): `scontrol requeue <job>` ends the running job at once
// (Slurm sends SIGTERM to every step, SIGKILL after KillWait) and puts it back in
// the queue with SLURM_RESTART_COUNT + 1. Nothing may be left to save by then.
//
// Time limit or preemption? Slurm 22.05 does not export the job's end time, so
// the end time comes from SLURM_JOB_END_TIME when the Slurm version sets it, else
// from `scontrol show job <id>` (EndTime=, local time). A checkpoint signal that
// arrives with at most lead + kTimeLimitSlack seconds left is the time limit
// (Slurm delivers --signal up to a minute early); one that arrives earlier is a
// preemption notice or a manual `scancel --signal=USR2 --batch <job>`; both are
// requeued. SIGTERM (scancel, a preemption with PreemptMode=CANCEL/REQUEUE, node
// shutdown) is never requeued by us: scancel means stop, and a preempting Slurm
// requeues on its own.
//
// The cap: a requeue is asked for only while SLURM_RESTART_COUNT < sweep.max_requeues.
// Slurm's counter counts every requeue (ours, preemption, node failure), so the
// cap bounds them all.
#include <cstdint>
#include <optional>
#include <string>

#include "slurm/env.h"

namespace mambamt::slurm {

enum class StopReason {
  none,        // no signal
  time_limit,  // checkpoint signal near the job's end time
  preemption,  // checkpoint signal well before the end time (preemption notice, manual scancel --signal)
  checkpoint,  // checkpoint signal, end time unknown (outside Slurm, scontrol unavailable)
  terminate,   // SIGTERM (when it is not the checkpoint signal)
};
std::string to_string(StopReason reason);

// Slurm may deliver --signal up to 60 s before the requested lead; 120 s of slack
// also covers a busy controller.
constexpr int64_t kTimeLimitSlack = 120;
// Lead assumed when MAMBAMT_SIGNAL_LEAD is unset (ablation_grid.slurm's default).
constexpr int64_t kDefaultSignalLead = 300;

// MAMBAMT_SIGNAL_LEAD (seconds), else kDefaultSignalLead. Throws InputError if malformed.
int64_t signal_lead_seconds(const Getenv& getenv);

StopReason classify_stop(int signo, int checkpoint_signo, std::optional<int64_t> end_time, int64_t now,
                         int64_t lead_s);

// The fields of `scontrol show job` that matter here.
struct SlurmJobInfo {
  std::string job_id;
  std::string state;  // JobState: RUNNING, PENDING, COMPLETED, ...
  std::string reason;
  int restarts = 0;
  bool requeue = false;  // Requeue=1
  std::optional<int64_t> start_time, end_time;  // Unix s
  std::optional<int64_t> time_limit_s;          // nullopt for UNLIMITED
};
// Parses the output of `scontrol show job [-o] <id>` (first job only). Throws
// InputError when there is no JobId field.
SlurmJobInfo parse_scontrol_show_job(const std::string& text);
// Runs `scontrol show job -o <id>`; nullopt if scontrol fails (not installed,
// controller unreachable, unknown job).
std::optional<SlurmJobInfo> query_slurm_job(const std::string& job_id);

// "2026-11-21T05:42:48" (Slurm's local time) -> Unix s; nullopt for "Unknown", "None", "N/A".
std::optional<int64_t> parse_slurm_time(const std::string& text);
// Slurm durations: "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS" -> seconds;
// nullopt for UNLIMITED / INFINITE / N/A. Throws InputError if malformed.
std::optional<int64_t> parse_slurm_duration(const std::string& text);

// The job's end time: env.end_time when the environment had it, else scontrol (Slurm jobs only).
std::optional<int64_t> job_end_time(const JobEnv& env);

struct RequeueDecision {
  bool requeue = false;
  std::string why;  // for the log and the sweep file
};
// `work_left`: the sweep has experiments that are not completed (or failed for good).
RequeueDecision decide_requeue(StopReason reason, int restart_count, int max_requeues, bool work_left);

// `scontrol requeue <job_id>`; throws Error with scontrol's output if it fails.
// Ends this job immediately: call it last.
void request_requeue(const std::string& job_id);

// The coordinator's whole decision on a stop signal, for logs and sweep.h5.
struct StopOutcome {
  StopReason reason = StopReason::none;
  std::optional<int64_t> end_time;  // as found (nullopt: unknown)
  RequeueDecision decision;
};
// Classifies the signal (end time from the environment or scontrol, lead from
// MAMBAMT_SIGNAL_LEAD) and decides; requesting the requeue is left to the caller
// (request_requeue, last). Only a Slurm job can be requeued this way; Grid
// Engine jobs are rescheduled by the batch script (exit 99).
StopOutcome decide_on_stop(const JobEnv& env, int signo, int checkpoint_signo, int max_requeues, bool work_left,
                           const Getenv& getenv, int64_t now);

}  // namespace mambamt::slurm
