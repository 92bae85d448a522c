#pragma once
// Filesystem helpers for crash safety: a file is written under a temporary
// name in the same directory, synced, and renamed over the real name, so a
// crash leaves either the old or the new file, never a broken one.
#include <sys/stat.h>

#include <cstdint>
#include <fstream>
#include <functional>
#include <optional>
#include <string>

namespace mambamt::core {

// A temporary name next to `path` (same directory, so rename is atomic),
// unique to this host, process and call: "<dir>/.<name>.tmp.<host>.<pid>.<n>".
std::string temp_path_for(const std::string& path);

// fsync a file or a directory by path (directories make renames durable).
void sync_path(const std::string& path);

// Writes `content` to `path` atomically (temp file, fsync, rename, fsync dir).
void write_file_atomic(const std::string& path, const std::string& content);

// Calls write(tmp) to produce the file under a temporary name, then syncs and
// renames it to `path`. If write throws, the temporary file is removed and
// `path` is untouched.
void replace_file_atomic(const std::string& path, const std::function<void(const std::string& tmp)>& write);

// Opens a file to read; throws InputError naming the path and why if it
// can't. A directory is refused here: it opens on Linux and reads as empty.
std::ifstream open_input_file(const std::string& path);

// Reads a whole file; throws InputError naming the path if it can't.
std::string read_file(const std::string& path);

// Checks that `dir` is a sweep's run directory (it holds sweep.h5, sweep.toml
// or exp/); throws InputError naming it otherwise. Readers (status, collect)
// call it before reading anything.
void require_run_directory(const std::string& dir);

// Renames a file that does not read back to <path>.unreadable (or
// <path>.unreadable.<n> when that is taken), so that it is kept for a look but
// no longer read; returns the new path, or "" when the file is gone already
// (another process repairing the same file beside this one moved it).
// Throws InputError naming both if the rename fails otherwise.
std::string set_aside_unreadable(const std::string& path);

// A file as stat saw it. Equal identities mean the same file, unchanged as far
// as a reader can tell: a writer that replaced or rewrote it changed the
// device or inode, the size or the modification time.
struct FileIdentity {
  uint64_t dev = 0, ino = 0;
  int64_t size = -1;
  int64_t mtime_sec = 0, mtime_nsec = 0;
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime_sec == o.mtime_sec && mtime_nsec == o.mtime_nsec;
  }
  bool operator!=(const FileIdentity& o) const { return !(*this == o); }
};
FileIdentity file_identity(const struct stat& st);
// The identity of the file at `path` (following links); nullopt when it cannot be stat'ed.
std::optional<FileIdentity> file_identity(const std::string& path);

// Creates a directory and its parents (no error if it exists).
void make_dirs(const std::string& path);

// Current host name.
std::string host_name();

// Whether process `pid` of this host lives: it exists (another user's counts)
// and is not a zombie (killed, not yet reaped by its parent: it holds
// nothing any more). False for pid <= 0.
bool process_alive(int64_t pid);

// Seconds since the Unix epoch, with sub-second resolution.
double unix_time();

// Removes leftover temporary files in `dir` written by processes of this host
// that no longer exist (files of other hosts are left alone).
void remove_stale_temp_files(const std::string& dir);

}  // namespace mambamt::core
