#pragma once
// Checkpoint files: named tensors of any dtype and shape plus named integers,
// floats and strings, in one HDF5 file that reads back bitwise equal.
//
// Layout: /tensors/<name> datasets (the name's '/' make subgroups; each has a
// `dtype` attribute with the torch dtype, since HDF5 1.10 has no bfloat16/half:
// those are stored as uint16 bit patterns, bool as uint8), and /meta with
// attributes for the scalars. Files are written under a temporary name and
// renamed, so a crash never leaves a broken checkpoint under the real name.
#include <torch/torch.h>

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace mambamt::core {

struct Checkpoint {
  std::map<std::string, torch::Tensor> tensors;
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> floats;
  std::map<std::string, std::string> strings;
};

// Atomic write (temp file + fsync + rename). Tensors may live on any device.
void write_checkpoint(const std::string& path, const Checkpoint& ckpt);
// Reads everything back onto the CPU. Throws InputError naming the path if
// the file is missing or not a checkpoint.
Checkpoint read_checkpoint(const std::string& path);

// The checkpoints of one experiment: <dir>/step_<8 digits>.h5 plus best.h5.
class CheckpointDir {
 public:
  explicit CheckpointDir(std::string dir);

  const std::string& dir() const { return dir_; }
  std::string path_for_step(int64_t step) const;
  std::string best_path() const;

  // Steps with a checkpoint, ascending. Temporary files are never listed.
  std::vector<int64_t> steps() const;
  std::optional<int64_t> latest_step() const;

  // The newest step checkpoint that reads back, and its step. A file that
  // does not read (truncated or corrupted on disk: writes are atomic, so not by
  // a crash of ours) is renamed aside to <name>.unreadable (or
  // <name>.unreadable.<n>: core::set_aside_unreadable), never deleted, and
  // reported through `skipped` (path, the error and where the file went); the
  // next older one is tried. nullopt: none reads (or none is there).
  struct Readable {
    int64_t step = 0;
    std::string path;
    Checkpoint checkpoint;
  };
  std::optional<Readable> latest_readable(
      const std::function<void(const std::string& path, const std::string& error)>& skipped = nullptr) const;

  // best.h5 is a byte copy of step_<best_step>.h5. When it does not open
  // (damaged on disk) and that step file is still kept and opens, the damaged
  // copy is set aside (best.h5.unreadable[.n]) and copied again. Returns what
  // was found and done, for the log ("" when best.h5 opens or is absent);
  // a best.h5 it cannot repair is left for the evaluation to report.
  std::string repair_best(int64_t best_step) const;

  // Writes the checkpoint of `step`, then keeps only the newest `keep_last`
  // step files. With `is_best`, best.h5 is replaced by it too.
  void save(int64_t step, const Checkpoint& ckpt, int64_t keep_last, bool is_best = false);

 private:
  std::string dir_;
};

}  // namespace mambamt::core
