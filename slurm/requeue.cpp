#include "slurm/requeue.h"

#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <ctime>
#include <sstream>
#include <vector>

#include "core/error.h"
#include "slurm/detail/process.h"

namespace mambamt::slurm {
namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
}

}  // namespace

std::string to_string(StopReason reason) {
  switch (reason) {
    case StopReason::none: return "none";
    case StopReason::time_limit: return "time_limit";
    case StopReason::preemption: return "preemption";
    case StopReason::checkpoint: return "checkpoint";
    case StopReason::terminate: return "terminate";
  }
  return "?";
}

int64_t signal_lead_seconds(const Getenv& getenv) {
  auto v = getenv("MAMBAMT_SIGNAL_LEAD");
  if (!v || v->empty()) return kDefaultSignalLead;
  if (!all_digits(*v)) throw InputError("MAMBAMT_SIGNAL_LEAD='" + *v + "': expected seconds (a non-negative integer)");
  return std::stoll(*v);
}

StopReason classify_stop(int signo, int checkpoint_signo, std::optional<int64_t> end_time, int64_t now,
                         int64_t lead_s) {
  if (signo == 0) return StopReason::none;
  if (signo != checkpoint_signo) return signo == SIGTERM ? StopReason::terminate : StopReason::checkpoint;
  if (!end_time) return StopReason::checkpoint;
  const int64_t left = *end_time - now;
  return left <= lead_s + kTimeLimitSlack ? StopReason::time_limit : StopReason::preemption;
}

std::optional<int64_t> parse_slurm_time(const std::string& text) {
  if (text.empty() || text == "Unknown" || text == "None" || text == "N/A" || text == "(null)") return std::nullopt;
  std::tm tm{};
  int year, mon, day, hour, min, sec;
  char tail = 0;
  if (std::sscanf(text.c_str(), "%d-%d-%dT%d:%d:%d%c", &year, &mon, &day, &hour, &min, &sec, &tail) != 6)
    throw InputError("'" + text + "': expected a Slurm time YYYY-MM-DDTHH:MM:SS");
  tm.tm_year = year - 1900;
  tm.tm_mon = mon - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = min;
  tm.tm_sec = sec;
  tm.tm_isdst = -1;  // Slurm prints local time; let mktime decide about DST
  return static_cast<int64_t>(std::mktime(&tm));
}

std::optional<int64_t> parse_slurm_duration(const std::string& text) {
  if (text == "UNLIMITED" || text == "INFINITE" || text == "Partition_Limit" || text == "N/A" || text == "NONE")
    return std::nullopt;
  auto bad = [&] { return InputError("'" + text + "': expected a Slurm duration ([D-]HH:MM:SS, MM:SS, MM, D-HH)"); };
  std::string rest = text;
  int64_t days = -1;
  if (const auto dash = rest.find('-'); dash != std::string::npos) {
    if (!all_digits(rest.substr(0, dash))) throw bad();
    days = std::stoll(rest.substr(0, dash));
    rest = rest.substr(dash + 1);
  }
  std::vector<int64_t> parts;
  std::istringstream in(rest);
  std::string p;
  while (std::getline(in, p, ':')) {
    if (!all_digits(p)) throw bad();
    parts.push_back(std::stoll(p));
  }
  if (parts.empty() || parts.size() > 3) throw bad();
  int64_t h = 0, m = 0, s = 0;
  if (days >= 0) {
    // D-HH, D-HH:MM, D-HH:MM:SS
    h = parts[0];
    if (parts.size() > 1) m = parts[1];
    if (parts.size() > 2) s = parts[2];
  } else if (parts.size() == 1) {
    m = parts[0];
  } else if (parts.size() == 2) {
    m = parts[0];
    s = parts[1];
  } else {
    h = parts[0];
    m = parts[1];
    s = parts[2];
  }
  return std::max<int64_t>(days, 0) * 86400 + h * 3600 + m * 60 + s;
}

SlurmJobInfo parse_scontrol_show_job(const std::string& text) {
  // Fields are Key=Value separated by blanks (one line with -o, several without);
  // a second "JobId=" starts the next job (array or pack jobs).
  SlurmJobInfo info;
  bool seen_id = false;
  std::istringstream in(text);
  std::string token;
  while (in >> token) {
    const auto eq = token.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = token.substr(0, eq), value = token.substr(eq + 1);
    if (key == "JobId") {
      if (seen_id) break;
      seen_id = true;
      info.job_id = value;
    } else if (key == "JobState") {
      info.state = value;
    } else if (key == "Reason") {
      info.reason = value;
    } else if (key == "Restarts") {
      if (all_digits(value)) info.restarts = std::stoi(value);
    } else if (key == "Requeue") {
      info.requeue = value == "1";
    } else if (key == "StartTime") {
      info.start_time = parse_slurm_time(value);
    } else if (key == "EndTime") {
      info.end_time = parse_slurm_time(value);
    } else if (key == "TimeLimit") {
      info.time_limit_s = parse_slurm_duration(value);
    }
  }
  if (!seen_id) throw InputError("scontrol show job: no JobId in '" + text.substr(0, 200) + "'");
  return info;
}

std::optional<SlurmJobInfo> query_slurm_job(const std::string& job_id) {
  const auto r = detail::run_process({"scontrol", "show", "job", "-o", job_id});
  if (r.exit_code != 0) return std::nullopt;
  try {
    return parse_scontrol_show_job(r.output);
  } catch (const InputError&) {
    return std::nullopt;
  }
}

std::optional<int64_t> job_end_time(const JobEnv& env) {
  if (env.end_time) return env.end_time;
  if (env.scheduler != Scheduler::slurm || env.job_id.empty()) return std::nullopt;
  const auto info = query_slurm_job(env.job_id);
  if (!info) return std::nullopt;
  return info->end_time;
}

RequeueDecision decide_requeue(StopReason reason, int restart_count, int max_requeues, bool work_left) {
  RequeueDecision d;
  const std::string count = "restart " + std::to_string(restart_count) + " of at most " + std::to_string(max_requeues);
  if (!work_left) {
    d.why = "nothing left to run";
  } else if (reason == StopReason::none) {
    d.why = "no stop signal";
  } else if (reason == StopReason::terminate) {
    d.why = "SIGTERM (scancel or preemption): not requeued by the sweep";
  } else if (restart_count >= max_requeues) {
    d.why = "requeue cap reached (" + count + ", sweep.max_requeues)";
  } else {
    d.requeue = true;
    d.why = to_string(reason) + ": requeue (" + count + ")";
  }
  return d;
}

void request_requeue(const std::string& job_id) {
  if (job_id.empty()) throw Error("cannot requeue: not inside a Slurm job (no SLURM_JOB_ID)");
  const auto r = detail::run_process({"scontrol", "requeue", job_id});
  if (r.exit_code != 0)
    throw Error("scontrol requeue " + job_id + " failed (exit " + std::to_string(r.exit_code) + "): " + r.output);
}

StopOutcome decide_on_stop(const JobEnv& env, int signo, int checkpoint_signo, int max_requeues, bool work_left,
                           const Getenv& getenv, int64_t now) {
  StopOutcome out;
  // Only the checkpoint signal needs the end time.
  if (signo != 0 && signo == checkpoint_signo) out.end_time = job_end_time(env);
  out.reason = classify_stop(signo, checkpoint_signo, out.end_time, now, signal_lead_seconds(getenv));
  if (env.scheduler != Scheduler::slurm) {
    out.decision.why = env.scheduler == Scheduler::none ? "not a batch job: nothing to requeue"
                                                        : "Grid Engine: the batch script reschedules (exit 99)";
    return out;
  }
  out.decision = decide_requeue(out.reason, env.restart_count, max_requeues, work_left);
  return out;
}

}  // namespace mambamt::slurm
