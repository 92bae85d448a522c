#pragma once
// A thin RAII layer over the HDF5 C API. Every hid_t is owned by a Handle that
// closes it with the matching H5?close; failures throw mambamt::Error with the
// HDF5 error stack and the file name. Files written here are plain groups,
// datasets and attributes, readable with h5dump and h5py.
//
// Every file created here is sealed when it closes: its first kSealBytes are
// an HDF5 user block (which HDF5 and h5py skip) holding the file's length and
// the CRC-32C of the bytes after the block (docs/STORE.md). File::open checks
// the seal before HDF5 reads a byte, so a file damaged on disk is an
// InputError that names it and not a crash: HDF5 follows damaged offsets into
// its global heap (where variable-length strings live) without checks, and
// crashes or loops. Files are never changed in place (writers write a new
// file and rename it over the old one), so a seal stays true. A file without
// a user block (written by h5py, or by a mambamt from before the seal) opens
// unchecked (`mambamt store seal` seals it: reseal below).
#include <hdf5.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace mambamt::core::h5 {

// Owns one HDF5 identifier.
class Handle {
 public:
  Handle() = default;
  explicit Handle(hid_t id) : id_(id) {}
  ~Handle() { reset(); }
  Handle(Handle&& o) noexcept : id_(o.id_) { o.id_ = H5I_INVALID_HID; }
  Handle& operator=(Handle&& o) noexcept {
    if (this != &o) {
      reset();
      id_ = o.id_;
      o.id_ = H5I_INVALID_HID;
    }
    return *this;
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  hid_t get() const { return id_; }
  explicit operator bool() const { return id_ >= 0; }
  void reset();

 private:
  hid_t id_ = H5I_INVALID_HID;
};

// Identifiers of any kind still open in this process (a leak check for tests).
long open_object_count();

class Dataset;
class Group;

// A group or dataset: both carry attributes.
class Object {
 public:
  hid_t id() const { return h_.get(); }
  const std::string& file() const { return file_; }
  const std::string& path() const { return path_; }

  bool has_attr(const std::string& name) const;
  std::vector<std::string> attr_names() const;
  void set_attr(const std::string& name, const std::string& value);
  void set_attr(const std::string& name, const char* value) { set_attr(name, std::string(value)); }
  void set_attr(const std::string& name, int64_t value);
  void set_attr(const std::string& name, double value);
  void set_attr(const std::string& name, const std::vector<std::string>& value);
  void set_attr(const std::string& name, const std::vector<double>& value);
  std::string attr_string(const std::string& name) const;
  int64_t attr_int(const std::string& name) const;
  double attr_double(const std::string& name) const;
  std::vector<std::string> attr_strings(const std::string& name) const;
  std::vector<double> attr_doubles(const std::string& name) const;
  // Defaults for absent attributes.
  std::string attr_string_or(const std::string& name, const std::string& def) const;
  int64_t attr_int_or(const std::string& name, int64_t def) const;
  double attr_double_or(const std::string& name, double def) const;

 protected:
  Object(Handle h, std::string file, std::string path) : h_(std::move(h)), file_(std::move(file)), path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& what) const;
  // `count` elements, checked against the file: a damaged file's dataspace
  // can claim more elements than its bytes hold (or than size_t counts),
  // which would be allocated before HDF5 reads anything. `what` names them.
  size_t checked_count(const std::vector<uint64_t>& shape, const std::string& what) const;
  Handle h_;
  std::string file_;  // for messages
  std::string path_;  // path inside the file
};

class Dataset : public Object {
 public:
  std::vector<uint64_t> shape() const;
  // The number of elements of shape(), or an Error naming the file when a
  // damaged file claims more than it can hold (read before allocating).
  size_t elements() const { return checked_count(shape(), "the dataset"); }
  // The whole dataset converted to doubles / int64 / strings.
  std::vector<double> read_doubles() const;
  std::vector<int64_t> read_ints() const;
  std::vector<std::string> read_strings() const;
  std::string read_string() const;  // a scalar string dataset
  // Raw read in the dataset's own memory type `mem_type` into `out`.
  void read_raw(hid_t mem_type, void* out) const;
  hid_t type_class() const;  // H5T_class_t of the stored type
  size_t type_size() const;

 private:
  friend class Group;
  using Object::Object;
};

class Group : public Object {
 public:
  bool has(const std::string& name) const;  // a direct child (group or dataset)
  bool has_group(const std::string& name) const;
  bool has_dataset(const std::string& name) const;
  std::vector<std::string> children() const;  // names, sorted
  Group group(const std::string& name) const;  // open (throws if absent)
  Group create_group(const std::string& name);  // intermediate groups created
  Group require_group(const std::string& name);  // open or create
  Dataset dataset(const std::string& name) const;
  void remove(const std::string& name);

  // Scalars and 1-D / N-D arrays.
  Dataset write_scalar(const std::string& name, double value);
  Dataset write_string(const std::string& name, const std::string& value);
  Dataset write_doubles(const std::string& name, const std::vector<double>& values,
                        const std::vector<uint64_t>& shape = {});
  Dataset write_ints(const std::string& name, const std::vector<int64_t>& values);
  Dataset write_strings(const std::string& name, const std::vector<std::string>& values);
  // Raw data of an HDF5 memory type with the given shape (empty shape = scalar).
  Dataset write_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape, const void* data,
                    bool chunked_extendible = false);

 private:
  friend class File;
  using Object::Object;
};

class File {
 public:
  // Creates a new file; fails if it exists unless `truncate`. It is sealed
  // when it closes.
  static File create(const std::string& path, bool truncate = false);
  // Opens a file to read, after checking its seal: InputError naming the
  // file when its bytes differ from those it was sealed with.
  static File open(const std::string& path);
  // Is this an HDF5 file? (A sealed one is, damaged or not: open() says
  // what is wrong with it.)
  static bool is_hdf5(const std::string& path);

  File(File&&) noexcept = default;
  File& operator=(File&&) = delete;
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  // Closes the file (and seals a created one) when close() has not; a
  // created file stays unsealed, so unreadable, when an exception is on its
  // way (the writer failed) or sealing fails.
  ~File();

  Group root() const;
  const std::string& path() const { return path_; }
  void flush();
  // Closes the file; a created one with everything of it still open, and
  // seals it. Throws Error when it cannot.
  void close();

 private:
  File(Handle h, std::string path, bool created);
  Handle h_;
  std::string path_;
  bool created_ = false;
  int uncaught_ = 0;  // std::uncaught_exceptions() when it was created
};

// The size of the user block that holds the seal.
constexpr size_t kSealBytes = 512;

// The seal of a file on disk (`mambamt store seal`).
enum class SealState {
  holds,         // sealed, and its bytes are those it was sealed with
  none,          // an HDF5 file without a user block (h5py, a mambamt from before the seal)
  foreign,       // an HDF5 file whose user block is another program's
  broken,        // sealed, but its bytes changed since, or its seal is damaged
  never_sealed,  // created by mambamt, but its writer stopped before it finished it
  not_hdf5,
};
struct SealCheck {
  SealState state;
  std::string why;  // what is wrong, for a message ("" for holds and none)
};
// Reads the whole file when it has a seal. InputError naming the file when
// it cannot be read.
SealCheck check_seal(const std::string& path);
// Does the file start with a seal, whether it holds or not? (Reads its
// first bytes only; false for a file that cannot be read.)
bool has_seal(const std::string& path);

// "N store(s) without a seal ...: `mambamt store seal DIR` seals them", the
// advice of `status` and `collect` when they read stores without a seal.
std::string unsealed_advice(long long count, const std::string& dir);

// Rewrites the HDF5 file at `path` (opened unchecked, whatever its seal) as
// a new sealed file and renames that over it: every object below the root
// (one H5Ocopy, which reads all their data, so a file HDF5 cannot read fails
// here; an object under two names stays one object, soft and external links
// stay links) and the root's attributes; a user block it had is dropped, its
// permissions kept. When the file is replaced or changed while it is copied
// (a writer renamed a new one over it), nothing is renamed: Error, and the
// file is as that writer left it. Throws InputError naming the file when
// HDF5 cannot open or copy it.
void reseal(const std::string& path);

// Runs `work`, which reads the HDF5 file `path`, in a child process, and
// says why it could not ("" when it did): HDF5 crashes or loops on some
// damaged files without a seal, and then only the child dies ("HDF5 crashed
// reading it (Segmentation fault): it is damaged"), or is killed after
// `timeout_s` seconds; an exception of `work` is its message.
std::string in_child(const std::string& path, const std::function<void()>& work, double timeout_s);

// in_child() for each path, one after the other in one child process while
// none crashes or loops (a fork costs ~30 ms beside LibTorch): after one
// does, a new child goes on with the next path. Why each could not, in
// order ("" for those done).
std::vector<std::string> in_children(const std::vector<std::string>& paths,
                                     const std::function<void(const std::string&)>& work,
                                     const std::function<double(const std::string&)>& timeout_s);

// Seconds a child may read a file of `bytes` before HDF5 is judged to loop
// on it: 30, and 1 more per 10 MB.
double child_read_timeout(uint64_t bytes);

// reseal() in_child(): the files resealed are the very files HDF5 may crash
// or loop on. A copy the child left is removed.
std::string reseal_in_child(const std::string& path, double timeout_s);

// Whether core::ExperimentStore::read reads a store without a seal in a
// child first (in_child), so that a damaged one HDF5 crashes or loops on is
// an InputError naming it instead of the death of this process. Off unless
// turned on: the commands that read the stores of a sweep and never run
// under MPI (status, collect, compare, store show) turn it on; an MPI
// process does not fork. `timeout_s` > 0 replaces child_read_timeout.
void set_unsealed_reads_in_child(bool on, double timeout_s = 0);
// The seconds a child may read an unsealed store of `bytes` for
// ExperimentStore::read; 0 when such reads are not made in a child.
double unsealed_read_child_timeout(uint64_t bytes);

// The HDF5 error stack of the last failure as one line (for messages).
std::string last_error();

// The errors of this wrapper start with the file ("<file>: <path>: ...").
// `message` without that "<file>: ", for an error that wraps it and names
// the file first itself ("<file>: unreadable store: <path>: ...").
std::string after_file(const std::string& file, const std::string& message);

// One-time library setup: silence HDF5's own printing (we throw instead).
void init();

}  // namespace mambamt::core::h5
