#pragma once
// Stop requests from signals. The checkpoint signal (sweep.checkpoint_signal,
// USR2 by default) asks every process to checkpoint its experiment and exit so
// that the job can be requeued; SIGTERM (scancel, preemption, node shutdown) is
// always a stop request as well. The handlers only record which signal arrived
// (async-signal-safe: one lock-free atomic store); the training loop and the
// coordinator poll stop_requested() at safe points.
//
// USR2 is the default because NCCL (and some MPI transports) install their own
// SIGUSR1 handler and can swallow it: a USR1 sent by Slurm then never reaches
// us. USR1 stays selectable for clusters whose tooling insists on it.
//
// The handlers use SA_RESTART, so an interrupted read/write/MPI progress call
// resumes instead of failing with EINTR.
#include <string>

namespace mambamt::core {

// Signal names accepted by sweep.checkpoint_signal ("SIG" prefix optional,
// case-insensitive): USR1, USR2, TERM, INT, HUP. Throws InputError otherwise.
int signal_number(const std::string& name);
// "USR2" for SIGUSR2 etc.; "SIG<n>" for others.
std::string signal_name(int signo);

// Installs the stop handlers for `checkpoint_signo` and SIGTERM (replacing any
// earlier installation by this function; handlers of other signals are left
// alone). Clears a pending stop request.
void install_stop_handlers(int checkpoint_signo);
void install_stop_handlers(const std::string& checkpoint_signal = "USR2");
// Puts back the dispositions that were in place before install_stop_handlers.
void uninstall_stop_handlers();

// True once the checkpoint signal or SIGTERM has arrived.
bool stop_requested();
// The first signal that arrived since the last reset (0 if none).
int stop_signal();
// True when the first signal was the checkpoint signal (checkpoint, then
// requeue); false for SIGTERM (checkpoint if there is time, never requeue:
// scancel means stop, and a preempting Slurm requeues on its own) or no signal.
bool checkpoint_requested();
// Signals received since the last reset (each delivery counts).
int stop_signal_count();
// Forgets any received signal (tests; a process that handled a request and
// carries on).
void reset_stop_request();

// Installed checkpoint signal number (0 when not installed).
int installed_checkpoint_signal();

}  // namespace mambamt::core
