// Stop reasons, the requeue decision and the scontrol calls (against a fake
// scontrol on PATH; the real one is exercised by the [slurm] tests).
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <ctime>
#include <string>

#include "core/error.h"
#include "slurm/requeue.h"
#include "test_util.h"

using namespace mambamt::slurm;

namespace {

// Puts a fake `scontrol` first on PATH for one test.
class FakeScontrol {
 public:
  explicit FakeScontrol(const std::string& body)
      : path_("PATH", (tmp_.path("bin") + ":" + (std::getenv("PATH") ? std::getenv("PATH") : "")).c_str()) {
    const std::string path = tmp_.path("bin/scontrol");
    write_text(path, "#!/bin/bash\necho \"$@\" >> " + tmp_.path("calls") + "\n" + body + "\n");
    ::chmod(path.c_str(), 0755);
  }
  std::string calls() const { return read_text(tmp_.path("calls")); }

 private:
  TempDir tmp_;
  ScopedEnv path_;
};

int64_t local_time(int y, int mo, int d, int h, int mi, int s) {
  std::tm tm{};
  tm.tm_year = y - 1900;
  tm.tm_mon = mo - 1;
  tm.tm_mday = d;
  tm.tm_hour = h;
  tm.tm_min = mi;
  tm.tm_sec = s;
  tm.tm_isdst = -1;
  return static_cast<int64_t>(std::mktime(&tm));
}

// `scontrol show job -o` as Slurm 22.05 prints it (shortened).
const char* kShowJob =
    "JobId=11 JobName=wrap UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901750 Nice=0 "
    "Account=(null) QOS=(null) JobState=RUNNING Reason=None Dependency=(null) Requeue=1 Restarts=2 "
    "BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:01 TimeLimit=00:05:00 TimeMin=N/A "
    "SubmitTime=2026-11-21T05:37:48 EligibleTime=2026-11-21T05:37:48 AccrueTime=2026-11-21T05:37:48 "
    "StartTime=2026-11-21T05:37:48 EndTime=2026-11-21T05:42:48 Deadline=N/A SuspendTime=None "
    "Partition=debug NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1\n";

}  // namespace

TEST_CASE("the checkpoint signal near the end time is the time limit, earlier a preemption") {
  const int64_t end = 1'000'000, lead = 300;
  // Slurm sends --signal up to a minute early: still the time limit.
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end - lead, lead) == StopReason::time_limit);
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end - lead - 60, lead) == StopReason::time_limit);
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end - lead - kTimeLimitSlack, lead) == StopReason::time_limit);
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end - lead - kTimeLimitSlack - 1, lead) == StopReason::preemption);
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end - 3600, lead) == StopReason::preemption);
  // Past the end time (a late handler): the time limit.
  CHECK(classify_stop(SIGUSR2, SIGUSR2, end, end + 5, lead) == StopReason::time_limit);
  CHECK(classify_stop(SIGUSR2, SIGUSR2, std::nullopt, end, lead) == StopReason::checkpoint);
  CHECK(classify_stop(SIGTERM, SIGUSR2, end, end - lead, lead) == StopReason::terminate);
  CHECK(classify_stop(SIGTERM, SIGTERM, end, end - lead, lead) == StopReason::time_limit);
  CHECK(classify_stop(0, SIGUSR2, end, end, lead) == StopReason::none);
  CHECK(to_string(StopReason::preemption) == "preemption");
}

TEST_CASE("requeue only on the checkpoint signal, with work left, under the cap") {
  auto d = decide_requeue(StopReason::time_limit, 0, 5, true);
  CHECK(d.requeue);
  CHECK(d.why == "time_limit: requeue (restart 0 of at most 5)");
  CHECK(decide_requeue(StopReason::preemption, 4, 5, true).requeue);
  CHECK(decide_requeue(StopReason::checkpoint, 0, 5, true).requeue);
  d = decide_requeue(StopReason::time_limit, 5, 5, true);
  CHECK_FALSE(d.requeue);
  CHECK(d.why.find("cap reached") != std::string::npos);
  CHECK_FALSE(decide_requeue(StopReason::time_limit, 0, 0, true).requeue);
  CHECK_FALSE(decide_requeue(StopReason::time_limit, 0, 5, false).requeue);
  CHECK_FALSE(decide_requeue(StopReason::terminate, 0, 5, true).requeue);
  CHECK_FALSE(decide_requeue(StopReason::none, 0, 5, true).requeue);
}

TEST_CASE("Slurm times and durations") {
  CHECK(parse_slurm_time("2026-11-21T05:42:48") == local_time(2026, 11, 21, 5, 42, 48));
  CHECK_FALSE(parse_slurm_time("Unknown"));
  CHECK_FALSE(parse_slurm_time("None"));
  CHECK_THROWS_AS(parse_slurm_time("21/11/2026"), mambamt::InputError);
  CHECK(parse_slurm_duration("5") == 300);
  CHECK(parse_slurm_duration("05:30") == 330);
  CHECK(parse_slurm_duration("24:00:00") == 86400);
  CHECK(parse_slurm_duration("1-02") == 93600);
  CHECK(parse_slurm_duration("1-02:03") == 93780);
  CHECK(parse_slurm_duration("2-00:00:10") == 172810);
  CHECK_FALSE(parse_slurm_duration("UNLIMITED"));
  CHECK_THROWS_AS(parse_slurm_duration("1:2:3:4"), mambamt::InputError);
  CHECK_THROWS_AS(parse_slurm_duration("ten"), mambamt::InputError);
}

TEST_CASE("scontrol show job: state, restarts, start/end time, time limit") {
  const auto info = parse_scontrol_show_job(kShowJob);
  CHECK(info.job_id == "11");
  CHECK(info.state == "RUNNING");
  CHECK(info.restarts == 2);
  CHECK(info.requeue);
  CHECK(info.start_time == local_time(2026, 11, 21, 5, 37, 48));
  CHECK(info.end_time == local_time(2026, 11, 21, 5, 42, 48));
  CHECK(info.time_limit_s == 300);
  // The multi-line form parses the same; a second job is not mixed in.
  std::string multi = kShowJob;
  for (auto& c : multi)
    if (c == ' ') c = '\n';
  multi += "\nJobId=12 JobState=PENDING Restarts=7\n";
  const auto first = parse_scontrol_show_job(multi);
  CHECK(first.job_id == "11");
  CHECK(first.restarts == 2);
  CHECK_THROWS_AS(parse_scontrol_show_job("slurm_load_jobs error: Invalid job id specified"), mambamt::InputError);
}

TEST_CASE("the end time comes from the environment, else from scontrol") {
  FakeScontrol fake(std::string("echo '") + kShowJob + "'");
  JobEnv env;
  env.scheduler = Scheduler::slurm;
  env.job_id = "11";
  CHECK(job_end_time(env) == local_time(2026, 11, 21, 5, 42, 48));
  CHECK(fake.calls() == "show job -o 11\n");
  env.end_time = 42;
  CHECK(job_end_time(env) == 42);
  CHECK(fake.calls() == "show job -o 11\n");  // not asked again
  env = JobEnv{};
  CHECK_FALSE(job_end_time(env));  // not a Slurm job: scontrol is not asked
}

TEST_CASE("decide_on_stop: reason from scontrol's end time and MAMBAMT_SIGNAL_LEAD") {
  FakeScontrol fake(std::string("echo '") + kShowJob + "'");
  JobEnv env;
  env.scheduler = Scheduler::slurm;
  env.job_id = "11";
  env.restart_count = 1;
  const int64_t end = local_time(2026, 11, 21, 5, 42, 48);
  auto lead = [](const std::string& v) { return map_getenv({{"MAMBAMT_SIGNAL_LEAD", v}}); };

  auto out = decide_on_stop(env, SIGUSR2, SIGUSR2, 5, true, lead("60"), end - 60);
  CHECK(out.reason == StopReason::time_limit);
  CHECK(out.end_time == end);
  CHECK(out.decision.requeue);
  out = decide_on_stop(env, SIGUSR2, SIGUSR2, 5, true, lead("60"), end - 1000);
  CHECK(out.reason == StopReason::preemption);
  CHECK(out.decision.requeue);
  out = decide_on_stop(env, SIGUSR2, SIGUSR2, 1, true, lead("60"), end - 60);
  CHECK_FALSE(out.decision.requeue);  // restart 1 of at most 1
  // The default lead (300 s) when the variable is unset.
  CHECK(decide_on_stop(env, SIGUSR2, SIGUSR2, 5, true, map_getenv({}), end - 400).reason == StopReason::time_limit);
  CHECK_THROWS_AS(decide_on_stop(env, SIGUSR2, SIGUSR2, 5, true, lead("5m"), end), mambamt::InputError);
  // SIGTERM does not ask for the end time.
  const std::string calls_before = fake.calls();
  out = decide_on_stop(env, SIGTERM, SIGUSR2, 5, true, lead("60"), end - 60);
  CHECK(out.reason == StopReason::terminate);
  CHECK_FALSE(out.decision.requeue);
  CHECK(fake.calls() == calls_before);
  // Grid Engine jobs are rescheduled by their batch script.
  JobEnv sge;
  sge.scheduler = Scheduler::grid_engine;
  sge.job_id = "7";
  out = decide_on_stop(sge, SIGUSR2, SIGUSR2, 5, true, lead("60"), end);
  CHECK(out.reason == StopReason::checkpoint);
  CHECK_FALSE(out.decision.requeue);
  CHECK(out.decision.why.find("exit 99") != std::string::npos);
}

TEST_CASE("request_requeue runs scontrol requeue and reports its failure") {
  {
    FakeScontrol fake("exit 0");
    CHECK_NOTHROW(request_requeue("123"));
    CHECK(fake.calls() == "requeue 123\n");
  }
  {
    FakeScontrol fake("echo 'Requested operation is presently disabled for job 123' >&2; exit 1");
    CHECK_THROWS_WITH(request_requeue("123"), Catch::Contains("presently disabled"));
  }
  CHECK_THROWS_WITH(request_requeue(""), Catch::Contains("not inside a Slurm job"));
  {
    // scontrol missing altogether.
    TempDir empty;
    const ScopedEnv path("PATH", empty.dir().c_str());
    CHECK_THROWS_WITH(request_requeue("5"), Catch::Contains("exit 127"));
    CHECK_FALSE(query_slurm_job("5"));
  }
}
