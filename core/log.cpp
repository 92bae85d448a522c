#include "core/log.h"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/basic_file_sink.h>
#include <spdlog/sinks/dist_sink.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <mutex>

#include "core/error.h"

namespace mambamt::core::log {

namespace {

std::atomic<int> g_rank{0};
// Per thread: rank 0's coordinator thread logs beside the worker thread's experiment.
thread_local std::string g_experiment = "-";
std::shared_ptr<spdlog::sinks::dist_sink_mt> g_sinks;
std::shared_ptr<spdlog::sinks::sink> g_console;

// %R: MPI rank.
class RankFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    auto s = std::to_string(g_rank.load());
    dest.append(s.data(), s.data() + s.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<RankFlag>(); }
};

// %E: experiment id, "-" outside an experiment.
class ExperimentFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&, spdlog::memory_buf_t& dest) override {
    // The formatter runs in the logging thread (the logger is synchronous).
    dest.append(g_experiment.data(), g_experiment.data() + g_experiment.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<ExperimentFlag>(); }
};

std::unique_ptr<spdlog::formatter> make_formatter() {
  auto f = std::make_unique<spdlog::pattern_formatter>();
  f->add_flag<RankFlag>('R').add_flag<ExperimentFlag>('E');
  f->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%l] [rank %R] [exp %E] %v");
  return f;
}

// The experiment's file sink takes the lines of the thread that runs the
// experiment only, not those of other threads of the process (the coordinator).
class ThreadFilterSink : public spdlog::sinks::sink {
 public:
  ThreadFilterSink(std::shared_ptr<spdlog::sinks::sink> inner, size_t thread_id)
      : inner_(std::move(inner)), thread_id_(thread_id) {}
  void log(const spdlog::details::log_msg& msg) override {
    if (msg.thread_id == thread_id_) inner_->log(msg);
  }
  void flush() override { inner_->flush(); }
  void set_pattern(const std::string& pattern) override { inner_->set_pattern(pattern); }
  void set_formatter(std::unique_ptr<spdlog::formatter> f) override { inner_->set_formatter(std::move(f)); }

 private:
  std::shared_ptr<spdlog::sinks::sink> inner_;
  size_t thread_id_;
};

}  // namespace

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    g_sinks = std::make_shared<spdlog::sinks::dist_sink_mt>();
    g_console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    g_sinks->add_sink(g_console);
    auto logger = std::make_shared<spdlog::logger>("mambamt", g_sinks);
    logger->set_formatter(make_formatter());
    logger->set_level(spdlog::level::info);
    logger->flush_on(spdlog::level::info);
    spdlog::set_default_logger(logger);
  });
}

void set_level(const std::string& level) {
  init();
  auto lvl = spdlog::level::from_str(level);
  // from_str maps unknown names to off; only "off" itself may mean off.
  if (lvl == spdlog::level::off && level != "off")
    throw UsageError("--log-level " + level + ": use one of trace, debug, info, warn, error, critical, off");
  spdlog::default_logger()->set_level(lvl);
}

void set_rank(int rank) { g_rank = rank; }
int rank() { return g_rank.load(); }

void set_console_to_stdout(bool on) {
  init();
  g_sinks->remove_sink(g_console);
  if (on)
    g_console = std::make_shared<spdlog::sinks::stdout_sink_mt>();
  else
    g_console = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  g_sinks->add_sink(g_console);
  spdlog::default_logger()->set_formatter(make_formatter());
}

struct ExperimentLog::Impl {
  std::shared_ptr<spdlog::sinks::sink> file;
  std::string previous;
};

ExperimentLog::ExperimentLog(const std::string& experiment_id, const std::string& log_file) : impl_(new Impl) {
  init();
  auto file = std::make_shared<spdlog::sinks::basic_file_sink_mt>(log_file, /*truncate=*/false);
  file->set_formatter(make_formatter());
  impl_->file = std::make_shared<ThreadFilterSink>(file, spdlog::details::os::thread_id());
  impl_->previous = g_experiment;
  g_experiment = experiment_id;
  g_sinks->add_sink(impl_->file);
}

ExperimentLog::~ExperimentLog() {
  spdlog::default_logger()->flush();
  g_sinks->remove_sink(impl_->file);
  g_experiment = impl_->previous;
}

}  // namespace mambamt::core::log
