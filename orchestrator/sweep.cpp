#include "orchestrator/sweep.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <deque>
#include <list>
#include <memory>
#include <iomanip>
#include <map>
#include <set>
#include <filesystem>
#include <sstream>
#include <thread>

#include "core/error.h"
#include "core/fs.h"
#include "core/signals.h"
#include "core/store.h"
#include "orchestrator/claim.h"
#include "train/experiment.h"

namespace mambamt::orchestrator {

namespace {

// Message tags on MPI_COMM_WORLD. Leaders send kReady/kResult/kHeartbeat to
// rank 0's coordinator; the coordinator sends kRun/kStop to leaders (rank 0's
// own worker included: MPI delivers self-messages like any other).
enum Tag : int { kReady = 7101, kResult = 7102, kHeartbeat = 7103, kRun = 7104, kStop = 7105 };

double now() { return core::unix_time(); }

void send_text(int dest, int tag, const std::string& s) {
  MPI_Send(s.data(), static_cast<int>(s.size()), MPI_CHAR, dest, tag, MPI_COMM_WORLD);
}

// Takes a message with `tag` from `source` if one is waiting. Matched probes
// (MPI-3) so two threads of a rank never race for the same message.
bool try_receive(int source, int tag, std::string& text, int& from) {
  int flag = 0;
  MPI_Message msg;
  MPI_Status st;
  MPI_Improbe(source, tag, MPI_COMM_WORLD, &flag, &msg, &st);
  if (!flag) return false;
  int n = 0;
  MPI_Get_count(&st, MPI_CHAR, &n);
  text.assign(static_cast<size_t>(n), '\0');
  MPI_Mrecv(text.data(), n, MPI_CHAR, &msg, MPI_STATUS_IGNORE);
  from = st.MPI_SOURCE;
  return true;
}

// Idle ranks poll and sleep instead of blocking: a blocking MPI receive spins
// a core, which would slow down the training next to it.
void nap() { std::this_thread::sleep_for(std::chrono::microseconds(500)); }

std::vector<std::string> split(const std::string& s, char sep, size_t max_parts) {
  std::vector<std::string> out;
  size_t start = 0;
  while (out.size() + 1 < max_parts) {
    size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + 1;
  }
  out.push_back(s.substr(start));
  return out;
}

// Group broadcast of a string from the group's rank 0.
std::string group_bcast(MPI_Comm group, const std::string& text) {
  int64_t n = static_cast<int64_t>(text.size());
  MPI_Bcast(&n, 1, MPI_INT64_T, 0, group);
  std::string out = text;
  out.resize(static_cast<size_t>(n));
  if (n > 0) MPI_Bcast(out.data(), static_cast<int>(n), MPI_CHAR, 0, group);
  return out;
}

// ------------------------------------------------------------------ worker

struct Assignment {
  std::string id, name;
  bool reset_attempts = false;
  std::string train_from;  // a completed experiment of the same training (RunOptions::train_from), or ""
  std::string config;      // canonical TOML
  bool evaluate = false;   // a completed experiment to evaluate again (--reevaluate), not to train
};

std::string encode(const Assignment& a) {
  return a.id + "\n" + a.name + "\n" + (a.reset_attempts ? "1" : "0") + (a.evaluate ? "e" : "") + "\n" +
         a.train_from + "\n" + a.config;
}

Assignment decode(const std::string& s) {
  auto parts = split(s, '\n', 5);
  if (parts.size() != 5) throw Error("malformed experiment assignment");
  const std::string& flags = parts[2];
  return {parts[0], parts[1], !flags.empty() && flags[0] == '1', parts[3], parts[4],
          flags.find('e') != std::string::npos};
}

// Completed, by an evaluation older than this mambamt's.
bool older_evaluation(const PointState& ps) {
  return ps.need == Need::done && ps.evaluation_version < core::kEvaluationVersion;
}

// Whether a point of this state is to be evaluated again: an older
// evaluation, and --reevaluate asked for.
bool evaluate_again(const SweepOptions& opt, const PointState& ps) { return opt.reevaluate && older_evaluation(ps); }

struct WorkerContext {
  const SweepOptions* opt = nullptr;
  std::string run_root;
  std::string sweep_name;
  MPI_Comm group = MPI_COMM_NULL;
  double heartbeat_seconds = 10;
};

// Runs one assignment on every rank of the group; returns "state\tstep\terror".
std::string run_assignment(const WorkerContext& ctx, const Assignment& a, bool leader) {
  const SweepOptions& opt = *ctx.opt;
  if (opt.simulate_ms >= 0) {
    std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(opt.simulate_ms * 1000)));
    return "completed\t0\t";
  }
  // The leader evaluates alone; the group's other ranks wait for the next experiment.
  if (a.evaluate && !leader) return "completed\t0\t";
  std::atomic<int64_t> step{0};
  std::atomic<bool> done{false};
  std::thread heartbeat;
  if (leader) {
    heartbeat = std::thread([&] {
      double last = now();
      while (!done.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        if (now() - last >= ctx.heartbeat_seconds) {
          send_text(0, kHeartbeat, a.id + "\t" + std::to_string(step.load()));
          last = now();
        }
      }
    });
  }
  train::RunResult r;
  try {
    core::ExperimentConfig config = core::parse_experiment(a.config, ctx.run_root + "/sweep.toml (point " + a.id + ")");
    if (a.evaluate) {
      // A completed experiment evaluated again: its training and status stay as they are.
      train::EvalRequest req;
      req.exp_dir = ctx.run_root + "/exp/" + a.id;
      req.threads = static_cast<int>(config.train.threads);
      req.local_rank = opt.local_rank;
      req.ranks_on_node = opt.ranks_on_node;
      req.should_stop = [] { return core::stop_requested(); };
      req.changed_parts_only = true;
      if (!opt.evaluator) throw Error("no experiment evaluator");
      r.state = opt.evaluator(req) ? core::RunState::completed : core::RunState::interrupted;
    } else {
      train::RunOptions ro;
      ro.exp_dir = ctx.run_root + "/exp/" + a.id;
      ro.name = a.name;
      ro.sweep = ctx.sweep_name;
      ro.shared_dir = ctx.run_root;
      ro.group = ctx.group;
      ro.local_rank = opt.local_rank;
      ro.ranks_on_node = opt.ranks_on_node;
      ro.job_id = opt.job_id;
      ro.reset_attempts = a.reset_attempts;
      ro.train_from = a.train_from;
      ro.on_progress = [&](const train::Progress& p) { step = p.step; };
      if (!opt.runner) throw Error("no experiment runner");
      r = opt.runner(config, ro);
    }
  } catch (const std::exception& e) {
    r.state = core::RunState::failed;
    r.error = e.what();
  }
  done = true;
  if (heartbeat.joinable()) heartbeat.join();
  std::string err = r.error;
  std::replace(err.begin(), err.end(), '\n', ' ');
  return std::string(core::to_string(r.state)) + "\t" + std::to_string(r.step) + "\t" + err;
}

void leader_loop(const WorkerContext& ctx) {
  send_text(0, kReady, "");
  std::string text;
  int from = 0;
  while (true) {
    if (try_receive(0, kStop, text, from)) {
      if (ctx.group != MPI_COMM_NULL) group_bcast(ctx.group, "");
      return;
    }
    if (!try_receive(0, kRun, text, from)) {
      nap();
      continue;
    }
    if (ctx.group != MPI_COMM_NULL) group_bcast(ctx.group, text);
    Assignment a = decode(text);
    std::string result = run_assignment(ctx, a, /*leader=*/true);
    send_text(0, kResult, a.id + "\t" + result);
  }
}

void member_loop(const WorkerContext& ctx) {
  while (true) {
    std::string text = group_bcast(ctx.group, "");
    if (text.empty()) return;
    run_assignment(ctx, decode(text), /*leader=*/false);
  }
}

// ------------------------------------------------------------------ coordinator

struct Leader {
  int rank = 0;
  bool ready = false;    // has said it is there
  bool busy = false;
  bool lost = false;
  bool stopped = false;
  size_t point = 0;
  int64_t claim = 0;
  int64_t step = 0;
  double since = 0;           // experiment sent
  double last_heartbeat = 0;
  double idle_since = 0;      // became free (ready or result)
  double busy_total = 0;
  double alive_from = 0;
  double alive_to = 0;
};

// An experiment sent without blocking: the buffer lives until MPI is done with it.
struct PendingSend {
  int rank = 0;
  std::unique_ptr<std::string> text;
  MPI_Request request = MPI_REQUEST_NULL;
};

class Coordinator {
 public:
  Coordinator(const SweepOptions& opt, const ExpandedGrid& grid, const RunDirectory& dir, std::deque<size_t> queue,
              std::vector<int> leader_ranks, SweepSummary base)
      : opt_(opt), grid_(grid), dir_(dir), queue_(std::move(queue)), summary_(std::move(base)) {
    me_ = this_process(opt.job_id, opt.restart_count);
    // Points of equal training ids train once (sweep.share_training); "" = alone.
    training_ids_.assign(grid_.points.size(), "");
    if (grid_.grid.sweep.share_training)
      for (size_t i = 0; i < grid_.points.size(); ++i)
        if (grid_.points[i].valid()) training_ids_[i] = grid_.points[i].config->training_id();
    for (int r : leader_ranks) {
      Leader l;
      l.rank = r;
      leaders_[r] = l;
    }
  }

  ~Coordinator() {
    for (auto& s : sends_) abandon(s);
  }

  SweepSummary run() {
    const auto& sw = grid_.grid.sweep;
    double start = now();
    double last_refresh = start;
    for (auto& [r, l] : leaders_) l.alive_from = start;
    while (true) {
      bool progressed = false;
      std::string text;
      int from = 0;
      while (try_receive(MPI_ANY_SOURCE, kReady, text, from)) {
        auto& l = leaders_.at(from);
        l.ready = true;
        l.idle_since = now();
        progressed = true;
      }
      while (try_receive(MPI_ANY_SOURCE, kHeartbeat, text, from)) {
        auto& l = leaders_.at(from);
        l.last_heartbeat = now();
        auto parts = split(text, '\t', 2);
        if (parts.size() == 2) l.step = std::atoll(parts[1].c_str());
      }
      while (try_receive(MPI_ANY_SOURCE, kResult, text, from)) {
        on_result(leaders_.at(from), text);
        progressed = true;
      }
      if (!stopping_ && core::stop_requested()) {
        stopping_ = true;
        summary_.interrupted = true;
        log("checkpoint signal: no new experiments; waiting for " + std::to_string(busy_count()) +
            " running experiment(s) to checkpoint");
      }
      check_heartbeats(sw.heartbeat_timeout);
      if (now() - last_refresh >= sw.heartbeat_seconds) {
        refresh_claims();
        last_refresh = now();
      }
      dispatch();
      reap_sends();
      if (busy_count() == 0 && !stopping_) leave_to_other_jobs();
      if (busy_count() == 0 && (queue_.empty() || stopping_)) break;
      if (!progressed) nap();
    }
    // Every leader that answered has taken its experiment; a lost one may never.
    for (auto& s : sends_) {
      if (leaders_.at(s.rank).lost)
        abandon(s);
      else
        MPI_Wait(&s.request, MPI_STATUS_IGNORE);
    }
    sends_.clear();
    for (auto& [r, l] : leaders_) {
      if (l.lost) continue;
      send_text(r, kStop, "");
      l.alive_to = now();
    }
    for (auto& [r, l] : leaders_) {
      if (l.lost) continue;
      summary_.busy_seconds += l.busy_total;
      summary_.rank_seconds += l.alive_to - l.alive_from;
    }
    summary_.remaining = summary_.total - summary_.completed - summary_.failed;
    return summary_;
  }

 private:
  void log(const std::string& s) {
    if (opt_.log)
      opt_.log(s);
    else
      spdlog::info("{}", s);
  }

  int busy_count() const {
    int n = 0;
    for (auto& [r, l] : leaders_) n += (l.busy && !l.lost);
    return n;
  }

  // Whether a point of the same training as point i is being trained: by a
  // leader of this job, or by another job working on the same run directory
  // (its live claim, the twin not completed yet; looked up at most once a
  // second per point).
  bool twin_in_training(size_t i) {
    if (training_ids_[i].empty()) return false;
    for (auto& [r, l] : leaders_)
      if (l.busy && !l.lost && l.point != i && training_ids_[l.point] == training_ids_[i]) {
        if (waiting_.insert(i).second)
          log("wait " + describe(i) + ": it shares the training of " + describe(l.point) + ", running");
        return true;
      }
    if (opt_.simulate_ms >= 0) return false;
    Elsewhere& e = elsewhere_[i];
    const double t = now();
    if (t - e.checked >= 1.0) {
      e.checked = t;
      e.twin.reset();
      const auto& sw = grid_.grid.sweep;
      for (size_t j = 0; j < grid_.points.size() && !e.twin; ++j) {
        if (j == i || training_ids_[j] != training_ids_[i]) continue;
        const std::optional<ClaimInfo> claim = current_claim(dir_.exp_dir(grid_.points[j].id));
        if (!claim || claim_is_stale(*claim, me_, sw.heartbeat_timeout)) continue;
        if (claim->owner.host == me_.host && claim->owner.pid == me_.pid) continue;  // ours: see the leaders
        if (point_state(dir_, grid_.points[j], sw.retries, false).need == Need::done) continue;
        e.twin = j;
      }
      // Only a point still to train waits; one to evaluate again does not.
      if (e.twin && point_state(dir_, grid_.points[i], sw.retries, false).need != Need::run) e.twin.reset();
    }
    if (!e.twin) return false;
    if (waiting_.insert(i).second)
      log("wait " + describe(i) + ": it shares the training of " + describe(*e.twin) + ", running in another job");
    return true;
  }

  // With nothing running here and every point left waiting for a twin that
  // another job trains, this job has nothing to do but wait: it leaves them to
  // that job (which evaluates them when their twin is trained, as its own)
  // and ends, instead of holding its allocation idle until then.
  void leave_to_other_jobs() {
    if (queue_.empty() || opt_.simulate_ms >= 0) return;
    for (size_t i : queue_)
      if (!twin_in_training(i) || !elsewhere_[i].twin) return;
    for (size_t i : queue_) {
      ++summary_.elsewhere;
      log("leave " + describe(i) + " to the job training " + describe(*elsewhere_[i].twin));
    }
    queue_.clear();
  }

  // The directory of a completed point of the same training as point i, or "".
  std::string trained_twin(size_t i) const {
    if (training_ids_[i].empty() || opt_.simulate_ms >= 0) return "";
    for (size_t j = 0; j < grid_.points.size(); ++j) {
      if (j == i || training_ids_[j] != training_ids_[i]) continue;
      if (point_state(dir_, grid_.points[j], grid_.grid.sweep.retries, false).need == Need::done)
        return dir_.exp_dir(grid_.points[j].id);
    }
    return "";
  }

  std::string describe(size_t i) const {
    const GridPoint& p = grid_.points[i];
    return p.id + " (" + p.name + (grid_.grid.sweep.seeds.size() > 1 ? ", seed " + std::to_string(p.seed) : "") + ")";
  }

  std::string progress() const {
    return "[" + std::to_string(summary_.completed + summary_.failed) + "/" + std::to_string(summary_.total) + "]";
  }

  void dispatch() {
    if (stopping_) return;
    for (auto& [r, l] : leaders_) {
      if (queue_.empty()) return;
      if (!l.ready || l.busy || l.lost) continue;
      while (!queue_.empty()) {
        // A point whose training another one is doing waits for it; the others go first.
        auto pick = std::find_if(queue_.begin(), queue_.end(), [&](size_t i) { return !twin_in_training(i); });
        if (pick == queue_.end()) return;
        size_t i = *pick;
        queue_.erase(pick);
        const GridPoint& p = grid_.points[i];
        std::string exp_dir = dir_.exp_dir(p.id);
        std::optional<int64_t> gen;
        if (opt_.simulate_ms < 0) {
          gen = try_claim(exp_dir, me_, grid_.grid.sweep.heartbeat_timeout);
          if (!gen) {
            ++summary_.elsewhere;
            log("skip " + describe(i) + ": another job is working on it");
            continue;
          }
          // Another job may have finished it since we looked.
          PointState ps = point_state(dir_, p, grid_.grid.sweep.retries, false);
          if (evaluate_again(opt_, ps)) {
            evaluating_.insert(i);
          } else if (ps.need != Need::run && !(opt_.retry_failed && retried_.count(i) == 0)) {
            release_claim(exp_dir, *gen);
            if (ps.need == Need::done) ++summary_.completed;
            else ++summary_.failed;
            continue;
          }
        }
        const bool again = evaluating_.count(i) > 0;
        Assignment a{p.id, p.name, !again && opt_.retry_failed && retried_.insert(i).second,
                     again ? "" : trained_twin(i), p.config->canonical(), again};
        double t = now();
        // Not MPI_Send: with more ranks than cores (mpi_yield_when_idle) a
        // blocking send gives up the CPU while it completes, and the next
        // free leader of a burst (the start of the sweep) waits for each one.
        PendingSend& s = sends_.emplace_back();
        s.rank = r;
        s.text = std::make_unique<std::string>(encode(a));
        MPI_Isend(s.text->data(), static_cast<int>(s.text->size()), MPI_CHAR, r, kRun, MPI_COMM_WORLD, &s.request);
        summary_.dispatch_ms.push_back((t - l.idle_since) * 1000.0);
        l.busy = true;
        l.point = i;
        l.claim = gen.value_or(0);
        l.since = l.last_heartbeat = t;
        l.step = 0;
        ++summary_.ran;
        log(progress() + (again ? " evaluate again " : " start ") + describe(i) + " on rank " + std::to_string(r));
        if (!a.train_from.empty()) log("  " + p.id + " shares the training of " + a.train_from);
        break;
      }
    }
  }

  void on_result(Leader& l, const std::string& text) {
    auto parts = split(text, '\t', 4);
    std::string state = parts.size() > 1 ? parts[1] : "failed";
    std::string step = parts.size() > 2 ? parts[2] : "0";
    std::string error = parts.size() > 3 ? parts[3] : "";
    size_t i = l.point;
    double t = now();
    l.busy = false;
    l.busy_total += t - l.since;
    l.idle_since = t;
    const GridPoint& p = grid_.points[i];
    std::string took = " after " + format_seconds(t - l.since);
    if (opt_.simulate_ms < 0) release_claim(dir_.exp_dir(p.id), l.claim);
    if (evaluating_.erase(i) > 0) {
      // A completed experiment evaluated again: it stays completed whatever happened.
      if (state == "completed") {
        ++summary_.completed;
        log(progress() + " evaluated " + describe(i) + took);
      } else if (state == "interrupted") {
        log(progress() + " evaluation of " + describe(i) + " stopped" + took + " (--reevaluate starts it again)");
        if (!stopping_) queue_.push_back(i);
      } else {
        ++summary_.failed;
        log(progress() + " evaluation of " + describe(i) + " failed" + took + ": " + error);
      }
      return;
    }
    if (state == "completed") {
      ++summary_.completed;
      log(progress() + " completed " + describe(i) + took);
      return;
    }
    if (state == "interrupted") {
      log(progress() + " interrupted " + describe(i) + " at step " + step + took + " (checkpointed)");
      if (!stopping_) queue_.push_back(i);
      return;
    }
    // Failed: another attempt resumes from the last checkpoint, while attempts last.
    int64_t attempts = 1;
    try {
      attempts = core::ExperimentStore::read(dir_.store_path(p.id)).status.attempts;
    } catch (const std::exception&) {
    }
    int64_t allowed = 1 + grid_.grid.sweep.retries;
    if (!stopping_ && attempts < allowed) {
      log(progress() + " failed " + describe(i) + took + " (attempt " + std::to_string(attempts) + " of " +
          std::to_string(allowed) + ", retrying): " + error);
      queue_.push_back(i);
    } else {
      ++summary_.failed;
      log(progress() + " failed " + describe(i) + took + " (attempt " + std::to_string(attempts) + " of " +
          std::to_string(allowed) + "): " + error);
    }
  }

  void check_heartbeats(double timeout) {
    double t = now();
    for (auto& [r, l] : leaders_) {
      if (!l.busy || l.lost || t - l.last_heartbeat <= timeout) continue;
      l.lost = true;
      const GridPoint& p = grid_.points[l.point];
      std::string why = "rank " + std::to_string(r) + " sent no heartbeat for " + format_seconds(t - l.last_heartbeat) +
                        " (at step " + std::to_string(l.step) + ")";
      log(progress() + " lost " + describe(l.point) + ": " + why);
      ++summary_.lost_ranks;
      // A store evaluated again stays completed: only its newer results are missing.
      if (opt_.simulate_ms >= 0 || evaluating_.count(l.point) > 0) continue;
      // We hold its claim, so we may write its store. The claim is kept until
      // this job ends: the silent rank may still be alive.
      try {
        core::ExperimentStore st = core::ExperimentStore::open(dir_.store_path(p.id));
        core::StoreStatus s = st.status();
        s.state = core::RunState::interrupted;
        s.last_error = why;
        st.set_status(s);
        st.commit();
      } catch (const std::exception& e) {
        log("could not mark " + p.id + " interrupted: " + e.what());
      }
    }
  }

  void refresh_claims() {
    if (opt_.simulate_ms >= 0) return;
    for (auto& [r, l] : leaders_)
      if (l.busy && !refresh_claim(dir_.exp_dir(grid_.points[l.point].id), l.claim))
        log("warning: the claim on " + describe(l.point) + " was taken over by another job");
  }

  void reap_sends() {
    for (auto it = sends_.begin(); it != sends_.end();) {
      int done = 0;
      MPI_Test(&it->request, &done, MPI_STATUS_IGNORE);
      it = done ? sends_.erase(it) : std::next(it);
    }
  }

  // A send that may never be received (lost leader, coordinator error): MPI
  // may still read its buffer, so the buffer is left to it (a few KB, once).
  static void abandon(PendingSend& s) {
    if (s.request == MPI_REQUEST_NULL) return;
    MPI_Request_free(&s.request);
    (void)s.text.release();
  }

  static std::string format_seconds(double s) {
    std::ostringstream o;
    o << std::fixed << std::setprecision(s < 10 ? 2 : 1) << s << " s";
    return o.str();
  }

  const SweepOptions& opt_;
  const ExpandedGrid& grid_;
  const RunDirectory& dir_;
  std::deque<size_t> queue_;
  std::vector<std::string> training_ids_;  // per point; "" = trains alone
  std::set<size_t> waiting_;               // points logged as waiting for a twin
  SweepSummary summary_;
  std::map<int, Leader> leaders_;
  std::set<size_t> retried_;
  std::set<size_t> evaluating_;  // points sent to be evaluated again (--reevaluate)
  struct Elsewhere {
    double checked = -1e18;
    std::optional<size_t> twin;  // a twin another job is training
  };
  std::map<size_t, Elsewhere> elsewhere_;  // per waiting point, the last look at the other jobs
  ClaimOwner me_;
  bool stopping_ = false;
  std::list<PendingSend> sends_;  // experiments sent, not yet known to be delivered
};

// A failed store for a point the config rejects, so it shows up with its error.
void record_invalid_point(const RunDirectory& dir, const GridPoint& p, const std::string& sweep, const ClaimOwner& me,
                          double timeout) {
  std::string exp_dir = dir.exp_dir(p.id);
  auto gen = try_claim(exp_dir, me, timeout);
  if (!gen) return;
  if (!std::filesystem::exists(dir.store_path(p.id))) {
    std::string overrides = "# invalid grid point: not a valid experiment\n";
    for (auto& [k, v] : p.overrides) overrides += "# " + k + " = " + v + "\n";
    core::ExperimentStore st = core::ExperimentStore::create(dir.store_path(p.id), {p.id, p.name, sweep, overrides});
    core::StoreStatus s = st.status();
    s.state = core::RunState::failed;
    s.attempts = 1;
    s.last_error = p.error;
    s.host = me.host;
    s.finished = core::unix_time();
    st.set_status(s);
    st.commit();
  }
  release_claim(exp_dir, *gen);
}

}  // namespace

std::string dry_run_listing(const ExpandedGrid& g, int64_t ranks_per_experiment, bool retry_failed,
                            bool reevaluate) {
  std::ostringstream out;
  int old_evaluations = 0;
  RunDirectory dir = run_directory_for(g.grid);
  bool exists = std::filesystem::exists(dir.root());
  double total = 0;
  int to_run = 0;
  out << "sweep " << g.grid.sweep.name << " (" << g.grid.source << "): " << g.points.size() << " points, design "
      << g.grid.sweep.design << ", seeds";
  for (auto s : g.grid.sweep.seeds) out << " " << s;
  out << ", " << ranks_per_experiment << " rank(s) per experiment\nrun directory " << dir.root()
      << (exists ? "" : " (new)") << "\n";
  if (exists) {
    const std::string change = grid_change(g);
    if (!change.empty()) out << change << "; the sweep refuses it without --allow-grid-change\n";
  }
  out << "\n";
  out << std::left << std::setw(14) << "id" << std::setw(10) << "state" << std::right << std::setw(12) << "est. PFLOP"
      << "  " << std::left << "point\n";
  std::map<std::string, std::string> first_of_training;  // training id -> the first point's id (share_training)
  int trainings = 0;
  for (auto& p : g.points) {
    // A point of the same training as an earlier one costs its evaluation only.
    std::string shares;
    if (p.valid()) {
      const std::string training = g.grid.sweep.share_training ? p.config->training_id() : p.id;
      auto [it, first] = first_of_training.emplace(training, p.id);
      if (first) ++trainings;
      else shares = it->second;
    }
    std::string state = "new";
    if (!p.valid()) state = "invalid";
    std::string old_evaluation;
    if (exists) {
      PointState ps = point_state(dir, p, g.grid.sweep.retries, retry_failed);
      if (ps.status) state = core::to_string(ps.status->state);
      if (!ps.unreadable.empty()) state = "unreadable";
      if (ps.need == Need::run && p.valid()) ++to_run;
      if (older_evaluation(ps)) {
        ++old_evaluations;
        std::string parts;
        for (const std::string& part : core::evaluation_parts_changed_since(ps.evaluation_version))
          parts += (parts.empty() ? "" : ", ") + part;
        old_evaluation = "      evaluated by an older mambamt (evaluation version " +
                         std::to_string(ps.evaluation_version) + ", now " +
                         std::to_string(core::kEvaluationVersion) + "): " +
                         (reevaluate ? "evaluated again" : "--reevaluate evaluates it again") + " (" + parts + ")\n";
      }
    } else if (p.valid()) {
      ++to_run;
    }
    if (shares.empty()) total += p.cost;
    std::ostringstream cost;
    cost << std::setprecision(3) << p.cost;
    out << std::left << std::setw(14) << p.id << std::setw(10) << state << std::right << std::setw(12)
        << (p.valid() ? cost.str() : "-") << "  " << p.name
        << (g.grid.sweep.seeds.size() > 1 ? "  seed " + std::to_string(p.seed) : "")
        << (p.attention.empty() ? "" : "  attention " + p.attention) << "\n";
    if (!p.valid()) out << "      " << p.error << "\n";
    if (!shares.empty()) out << "      trains once with " << shares << " (differs in evaluation settings only)\n";
    out << old_evaluation;
  }
  for (auto& d : g.duplicates) out << "duplicate point, runs once: " << d << "\n";
  for (const std::string& w : attention_warnings(g)) out << w << "\n";
  std::ostringstream tc;
  tc << std::setprecision(3) << total;
  out << "\n" << to_run << " of " << g.points.size() << " points to run; " << trainings << " training(s), estimated total "
      << tc.str() << " PFLOP\n";
  if (old_evaluations > 0)
    out << old_evaluations << " completed point(s) evaluated by an older mambamt"
        << (reevaluate ? ": evaluated again (--reevaluate)" : ": `--reevaluate` evaluates them again") << "\n";
  return out.str();
}

SweepSummary run_sweep(const SweepOptions& opt) {
  int rank = 0, world = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world);
  if (opt.expected_world_size > 0 && opt.expected_world_size != world)
    throw Error("this MPI job has " + std::to_string(world) + " rank(s) but the launcher started " +
                std::to_string(opt.expected_world_size) +
                " tasks: the ranks did not find each other (under Slurm use `srun --mpi=pmix`, else mpirun)");

  // Rank 0 reads the grid and prepares the run directory; the others wait
  // for its verdict so a bad grid stops every rank.
  SweepSummary summary;
  ExpandedGrid grid;
  std::optional<RunDirectory> dir;
  std::deque<size_t> queue;
  std::string failure;
  int64_t settings[3] = {0, 1, 10000};  // ok, ranks per experiment, heartbeat ms
  if (rank == 0) {
    try {
      grid = expand_grid(core::load_grid(opt.grid_file));
      const auto& sw = grid.grid.sweep;
      if (sw.ranks_per_experiment > world)
        throw InputError(opt.grid_file + ": sweep.ranks_per_experiment = " + std::to_string(sw.ranks_per_experiment) +
                         " but the job has " + std::to_string(world) + " rank(s)");
      dir = prepare_run_directory(grid, opt.allow_grid_change);
      summary.run_dir = dir->root();
      summary.total = static_cast<int>(grid.points.size());
      ClaimOwner me = this_process(opt.job_id, opt.restart_count);
      for (size_t i = 0; i < grid.points.size(); ++i) {
        const GridPoint& p = grid.points[i];
        PointState ps = opt.simulate_ms >= 0 ? PointState{} : point_state(*dir, p, sw.retries, opt.retry_failed);
        if (!p.valid()) {
          if (opt.simulate_ms < 0) record_invalid_point(*dir, p, sw.name, me, sw.heartbeat_timeout);
          ++summary.failed;
          continue;
        }
        if (evaluate_again(opt, ps)) queue.push_back(i);
        else if (ps.need == Need::done) ++summary.completed;
        else if (ps.need == Need::failed_final) ++summary.failed;
        else queue.push_back(i);
        if (!ps.unreadable.empty())
          spdlog::warn("{} (left alone: move the store aside to run the experiment again from its checkpoints, or its "
                       "directory to start it over)",
                       ps.unreadable);
      }
      if (sw.order == "cost")
        std::stable_sort(queue.begin(), queue.end(),
                         [&](size_t a, size_t b) { return grid.points[a].cost > grid.points[b].cost; });
      if (opt.simulate_ms < 0) {
        SweepRecord fresh = sweep_record_for(grid);
        update_sweep_record(dir->sweep_file(), fresh, [&](SweepRecord& r) {
          r.state = "running";
          if (!opt.job_id.empty() && std::find(r.job_ids.begin(), r.job_ids.end(), opt.job_id) == r.job_ids.end())
            r.job_ids.push_back(opt.job_id);
          r.requeues = std::max(r.requeues, opt.restart_count);
        });
      }
      settings[0] = 1;
      settings[1] = sw.ranks_per_experiment;
      settings[2] = static_cast<int64_t>(sw.heartbeat_seconds * 1000);
    } catch (const std::exception& e) {
      failure = e.what();
    }
  }
  MPI_Bcast(settings, 3, MPI_INT64_T, 0, MPI_COMM_WORLD);
  if (!settings[0]) {
    if (rank == 0) throw InputError(failure);
    throw Error("rank 0 could not start the sweep (its message says why)");
  }
  // Run directory and sweep name for the workers.
  std::string run_root = group_bcast(MPI_COMM_WORLD, rank == 0 ? dir->root() : "");
  std::string name = group_bcast(MPI_COMM_WORLD, rank == 0 ? grid.grid.sweep.name : "");
  int k = static_cast<int>(settings[1]);
  int groups = world / k;
  int color = rank < groups * k ? rank / k : MPI_UNDEFINED;
  MPI_Comm group = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, color, rank, &group);
  if (color == MPI_UNDEFINED) {
    spdlog::warn("rank {} idles: {} ranks do not divide into groups of {}", rank, world, k);
    return summary;
  }
  int group_rank = 0;
  MPI_Comm_rank(group, &group_rank);
  MPI_Comm work_group = group;
  if (k == 1) {
    MPI_Comm_free(&group);
    work_group = MPI_COMM_NULL;
  }

  WorkerContext ctx{&opt, run_root, name, work_group, static_cast<double>(settings[2]) / 1000.0};

  std::thread coordinator;
  SweepSummary coordinated;
  std::string coordinator_error;
  std::vector<int> leaders;  // outlives the coordinator thread, which reads it
  for (int g = 0; g < groups; ++g) leaders.push_back(g * k);
  if (rank == 0) {
    coordinator = std::thread([&] {
      try {
        Coordinator c(opt, grid, *dir, queue, leaders, summary);
        coordinated = c.run();
      } catch (const std::exception& e) {
        coordinator_error = e.what();
        // Workers wait for orders forever otherwise.
        for (int r : leaders) send_text(r, kStop, "");
      }
    });
  }
  if (group_rank == 0)
    leader_loop(ctx);
  else
    member_loop(ctx);
  if (work_group != MPI_COMM_NULL) MPI_Comm_free(&work_group);
  if (rank != 0) return summary;

  coordinator.join();
  if (!coordinator_error.empty()) throw Error("sweep coordinator: " + coordinator_error);
  if (opt.simulate_ms < 0) {
    update_sweep_record(dir->sweep_file(), sweep_record_for(grid), [&](SweepRecord& r) {
      r.state = coordinated.interrupted ? "interrupted" : (coordinated.remaining == 0 ? "completed" : "running");
    });
  }
  return coordinated;
}

}  // namespace mambamt::orchestrator
