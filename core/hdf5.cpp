#include "core/hdf5.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <limits>
#include <memory>
#include <mutex>
#include <sstream>

#include "core/error.h"
#include "core/fs.h"
#include "core/hash.h"

namespace fs = std::filesystem;

namespace mambamt::core::h5 {

void init() {
  static std::once_flag once;
  std::call_once(once, [] {
    H5open();
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

std::string last_error() {
  std::string out;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_DOWNWARD,
      [](unsigned n, const H5E_error2_t* e, void* data) -> herr_t {
        auto* s = static_cast<std::string*>(data);
        if (n > 3) return 0;  // the innermost few frames say what went wrong
        if (!s->empty()) *s += "; ";
        *s += e->desc ? e->desc : "?";
        return 0;
      },
      &out);
  H5Eclear2(H5E_DEFAULT);
  return out.empty() ? "HDF5 error" : out;
}

std::string after_file(const std::string& file, const std::string& message) {
  const std::string prefix = file + ": ";
  return message.rfind(prefix, 0) == 0 ? message.substr(prefix.size()) : message;
}

void Handle::reset() {
  if (id_ < 0) return;
  // Closing a file closes its objects too (File::close): their ids are dead.
  if (H5Iis_valid(id_) <= 0) {
    id_ = H5I_INVALID_HID;
    return;
  }
  switch (H5Iget_type(id_)) {
    case H5I_FILE: H5Fclose(id_); break;
    case H5I_GROUP: H5Gclose(id_); break;
    case H5I_DATASET: H5Dclose(id_); break;
    case H5I_ATTR: H5Aclose(id_); break;
    case H5I_DATASPACE: H5Sclose(id_); break;
    case H5I_DATATYPE: H5Tclose(id_); break;
    case H5I_GENPROP_LST: H5Pclose(id_); break;
    default: break;
  }
  id_ = H5I_INVALID_HID;
}

long open_object_count() {
  return static_cast<long>(H5Fget_obj_count(static_cast<hid_t>(H5F_OBJ_ALL), H5F_OBJ_ALL));
}

namespace {

Handle check(hid_t id, const std::string& what) {
  if (id < 0) throw Error(what + ": " + last_error());
  return Handle(id);
}

Handle string_type() {
  Handle t = check(H5Tcopy(H5T_C_S1), "H5Tcopy");
  H5Tset_size(t.get(), H5T_VARIABLE);
  H5Tset_cset(t.get(), H5T_CSET_UTF8);
  return t;
}

std::string join_path(const std::string& a, const std::string& b) {
  if (a.empty() || a == "/") return "/" + b;
  return a + "/" + b;
}

// Reads variable- or fixed-length strings of a dataset or attribute.
template <class ReadFn>
std::vector<std::string> read_string_data(hid_t file_type, size_t count, ReadFn read) {
  std::vector<std::string> out;
  if (H5Tis_variable_str(file_type) > 0) {
    Handle mem = string_type();
    std::vector<char*> ptrs(count, nullptr);
    read(mem.get(), ptrs.data());
    for (auto* p : ptrs) out.emplace_back(p ? p : "");
    // Reclaim the library's allocations.
    for (auto* p : ptrs) H5free_memory(p);
  } else {
    size_t len = H5Tget_size(file_type);
    Handle mem = check(H5Tcopy(H5T_C_S1), "H5Tcopy");
    H5Tset_size(mem.get(), len);
    std::vector<char> buf(len * count + 1, 0);
    read(mem.get(), buf.data());
    for (size_t i = 0; i < count; ++i) {
      std::string s(buf.data() + i * len, len);
      s.erase(std::find(s.begin(), s.end(), '\0'), s.end());
      out.push_back(s);
    }
  }
  return out;
}

}  // namespace

// ---------------------------------------------------------------- Object

void Object::fail(const std::string& what) const {
  throw Error(file_ + ": " + path_ + ": " + what + ": " + last_error());
}

size_t Object::checked_count(const std::vector<uint64_t>& shape, const std::string& what) const {
  // Every element takes at least a byte of the file (nothing is compressed,
  // and every dataset and attribute is written whole when it is made).
  Handle f(H5Iget_file_id(id()));
  hsize_t file_bytes = 0;
  if (!f || H5Fget_filesize(f.get(), &file_bytes) < 0) fail("cannot get the file's size");
  uint64_t n = 1;
  bool over = false;  // past uint64: more than any file holds
  for (uint64_t d : shape) {
    over = over || (d != 0 && n > std::numeric_limits<uint64_t>::max() / d);
    if (!over) n *= d;
  }
  if (over || n > file_bytes) {
    std::string dims;
    for (uint64_t d : shape) dims += (dims.empty() ? "" : " x ") + std::to_string(d);
    throw Error(file_ + ": " + path_ + ": damaged: " + what + " of shape " + dims + " claims more elements than the " +
                std::to_string(file_bytes) + "-byte file holds");
  }
  return static_cast<size_t>(n);
}

bool Object::has_attr(const std::string& name) const { return H5Aexists(id(), name.c_str()) > 0; }

std::vector<std::string> Object::attr_names() const {
  std::vector<std::string> names;
  H5Aiterate2(
      id(), H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* n, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(n);
        return 0;
      },
      &names);
  return names;
}

namespace {

// Replaces attribute `name` of `obj` with one of `type` and `space` holding `data`.
void write_attr(const Object& obj, hid_t oid, const std::string& name, hid_t type, hid_t space, const void* data) {
  if (H5Aexists(oid, name.c_str()) > 0) H5Adelete(oid, name.c_str());
  Handle a(H5Acreate2(oid, name.c_str(), type, space, H5P_DEFAULT, H5P_DEFAULT));
  if (!a) throw Error(obj.file() + ": " + obj.path() + ": cannot create attribute " + name + ": " + last_error());
  if (H5Awrite(a.get(), type, data) < 0)
    throw Error(obj.file() + ": " + obj.path() + ": cannot write attribute " + name + ": " + last_error());
}

}  // namespace

void Object::set_attr(const std::string& name, const std::string& value) {
  Handle t = string_type();
  Handle s = check(H5Screate(H5S_SCALAR), "H5Screate");
  const char* p = value.c_str();
  write_attr(*this, id(), name, t.get(), s.get(), &p);
}

void Object::set_attr(const std::string& name, int64_t value) {
  Handle s = check(H5Screate(H5S_SCALAR), "H5Screate");
  write_attr(*this, id(), name, H5T_NATIVE_INT64, s.get(), &value);
}

void Object::set_attr(const std::string& name, double value) {
  Handle s = check(H5Screate(H5S_SCALAR), "H5Screate");
  write_attr(*this, id(), name, H5T_NATIVE_DOUBLE, s.get(), &value);
}

namespace {
// An empty array attribute has a null dataspace (HDF5 writes no zero-length data).
void write_empty_attr(const Object& obj, hid_t oid, const std::string& name, hid_t type) {
  if (H5Aexists(oid, name.c_str()) > 0) H5Adelete(oid, name.c_str());
  Handle s(H5Screate(H5S_NULL));
  Handle a(H5Acreate2(oid, name.c_str(), type, s.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!a) throw Error(obj.file() + ": " + obj.path() + ": cannot create attribute " + name + ": " + last_error());
}
}  // namespace

void Object::set_attr(const std::string& name, const std::vector<std::string>& value) {
  Handle t = string_type();
  if (value.empty()) return write_empty_attr(*this, id(), name, t.get());
  hsize_t n = value.size();
  Handle s = check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
  std::vector<const char*> ptrs;
  for (auto& v : value) ptrs.push_back(v.c_str());
  write_attr(*this, id(), name, t.get(), s.get(), ptrs.data());
}

void Object::set_attr(const std::string& name, const std::vector<double>& value) {
  if (value.empty()) return write_empty_attr(*this, id(), name, H5T_NATIVE_DOUBLE);
  hsize_t n = value.size();
  Handle s = check(H5Screate_simple(1, &n, nullptr), "H5Screate_simple");
  write_attr(*this, id(), name, H5T_NATIVE_DOUBLE, s.get(), value.data());
}

std::string Object::attr_string(const std::string& name) const {
  auto v = attr_strings(name);
  if (v.size() != 1) fail("attribute " + name + " is not a single string");
  return v[0];
}

std::vector<std::string> Object::attr_strings(const std::string& name) const {
  Handle a(H5Aopen(id(), name.c_str(), H5P_DEFAULT));
  if (!a) fail("no attribute " + name);
  Handle ft(H5Aget_type(a.get()));
  if (H5Tget_class(ft.get()) != H5T_STRING) fail("attribute " + name + " is not a string");
  Handle sp(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_type(sp.get()) == H5S_NULL) return {};
  const hssize_t points = H5Sget_simple_extent_npoints(sp.get());
  if (points < 0) fail("cannot read the shape of attribute " + name);
  const size_t n = checked_count({static_cast<uint64_t>(points)}, "attribute " + name);
  return read_string_data(ft.get(), n, [&](hid_t mem, void* buf) {
    if (H5Aread(a.get(), mem, buf) < 0) fail("cannot read attribute " + name);
  });
}

std::vector<double> Object::attr_doubles(const std::string& name) const {
  Handle a(H5Aopen(id(), name.c_str(), H5P_DEFAULT));
  if (!a) fail("no attribute " + name);
  Handle sp(H5Aget_space(a.get()));
  if (H5Sget_simple_extent_type(sp.get()) == H5S_NULL) return {};
  const hssize_t points = H5Sget_simple_extent_npoints(sp.get());
  if (points < 0) fail("cannot read the shape of attribute " + name);
  const size_t n = checked_count({static_cast<uint64_t>(points)}, "attribute " + name);
  std::vector<double> out(n);
  if (n > 0 && H5Aread(a.get(), H5T_NATIVE_DOUBLE, out.data()) < 0) fail("cannot read attribute " + name);
  return out;
}

int64_t Object::attr_int(const std::string& name) const {
  Handle a(H5Aopen(id(), name.c_str(), H5P_DEFAULT));
  if (!a) fail("no attribute " + name);
  int64_t v = 0;
  if (H5Aread(a.get(), H5T_NATIVE_INT64, &v) < 0) fail("cannot read attribute " + name + " as an integer");
  return v;
}

double Object::attr_double(const std::string& name) const {
  auto v = attr_doubles(name);
  if (v.size() != 1) fail("attribute " + name + " is not a single number");
  return v[0];
}

std::string Object::attr_string_or(const std::string& name, const std::string& def) const {
  return has_attr(name) ? attr_string(name) : def;
}
int64_t Object::attr_int_or(const std::string& name, int64_t def) const {
  return has_attr(name) ? attr_int(name) : def;
}
double Object::attr_double_or(const std::string& name, double def) const {
  return has_attr(name) ? attr_double(name) : def;
}

// ---------------------------------------------------------------- Dataset

namespace {
size_t element_count(const std::vector<uint64_t>& shape) {
  size_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}
}  // namespace

std::vector<uint64_t> Dataset::shape() const {
  Handle sp(H5Dget_space(id()));
  int rank = H5Sget_simple_extent_ndims(sp.get());
  std::vector<hsize_t> dims(std::max(rank, 0));
  if (rank > 0) H5Sget_simple_extent_dims(sp.get(), dims.data(), nullptr);
  return std::vector<uint64_t>(dims.begin(), dims.end());
}

hid_t Dataset::type_class() const {
  Handle t(H5Dget_type(id()));
  return H5Tget_class(t.get());
}

size_t Dataset::type_size() const {
  Handle t(H5Dget_type(id()));
  return H5Tget_size(t.get());
}

void Dataset::read_raw(hid_t mem_type, void* out) const {
  if (H5Dread(id(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out) < 0) fail("cannot read");
}

std::vector<double> Dataset::read_doubles() const {
  std::vector<double> out(elements());
  if (!out.empty()) read_raw(H5T_NATIVE_DOUBLE, out.data());
  return out;
}

std::vector<int64_t> Dataset::read_ints() const {
  std::vector<int64_t> out(elements());
  if (!out.empty()) read_raw(H5T_NATIVE_INT64, out.data());
  return out;
}

std::vector<std::string> Dataset::read_strings() const {
  Handle ft(H5Dget_type(id()));
  if (H5Tget_class(ft.get()) != H5T_STRING) fail("not a string dataset");
  const size_t n = elements();
  return read_string_data(ft.get(), n, [&](hid_t mem, void* buf) { read_raw(mem, buf); });
}

std::string Dataset::read_string() const {
  auto v = read_strings();
  if (v.size() != 1) fail("not a single string");
  return v[0];
}

// ---------------------------------------------------------------- Group

bool Group::has(const std::string& name) const {
  // H5Lexists on a nested path needs every parent to exist; walk it.
  std::string sofar;
  size_t start = 0;
  while (true) {
    size_t slash = name.find('/', start);
    sofar = name.substr(0, slash);
    if (H5Lexists(id(), sofar.c_str(), H5P_DEFAULT) <= 0) return false;
    if (slash == std::string::npos) return true;
    start = slash + 1;
  }
}

bool Group::has_group(const std::string& name) const {
  if (!has(name)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(id(), name.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_GROUP;
}

bool Group::has_dataset(const std::string& name) const {
  if (!has(name)) return false;
  H5O_info_t info;
  if (H5Oget_info_by_name(id(), name.c_str(), &info, H5P_DEFAULT) < 0) return false;
  return info.type == H5O_TYPE_DATASET;
}

namespace {

// The names of the links of a group.
std::vector<std::string> link_names(hid_t group) {
  std::vector<std::string> out;
  H5Literate(
      group, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* n, const H5L_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->emplace_back(n);
        return 0;
      },
      &out);
  return out;
}

}  // namespace

std::vector<std::string> Group::children() const {
  std::vector<std::string> names = link_names(id());
  std::sort(names.begin(), names.end());
  return names;
}

Group Group::group(const std::string& name) const {
  Handle g(H5Gopen2(id(), name.c_str(), H5P_DEFAULT));
  if (!g) fail("no group " + name);
  return Group(std::move(g), file_, join_path(path_, name));
}

Group Group::create_group(const std::string& name) {
  Handle lcpl = check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate");
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle g(H5Gcreate2(id(), name.c_str(), lcpl.get(), H5P_DEFAULT, H5P_DEFAULT));
  if (!g) fail("cannot create group " + name);
  return Group(std::move(g), file_, join_path(path_, name));
}

Group Group::require_group(const std::string& name) { return has(name) ? group(name) : create_group(name); }

Dataset Group::dataset(const std::string& name) const {
  Handle d(H5Dopen2(id(), name.c_str(), H5P_DEFAULT));
  if (!d) fail("no dataset " + name);
  return Dataset(std::move(d), file_, join_path(path_, name));
}

void Group::remove(const std::string& name) {
  if (H5Ldelete(id(), name.c_str(), H5P_DEFAULT) < 0) fail("cannot remove " + name);
}

Dataset Group::write_raw(const std::string& name, hid_t type, const std::vector<uint64_t>& shape, const void* data,
                         bool chunked_extendible) {
  if (has(name)) remove(name);
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  Handle space;
  Handle dcpl = check(H5Pcreate(H5P_DATASET_CREATE), "H5Pcreate");
  if (dims.empty()) {
    space = check(H5Screate(H5S_SCALAR), "H5Screate");
  } else if (chunked_extendible) {
    std::vector<hsize_t> maxdims(dims.size(), H5S_UNLIMITED);
    space = check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), maxdims.data()), "H5Screate_simple");
    std::vector<hsize_t> chunk(dims.size(), 1);
    chunk[0] = 256;
    H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data());
  } else {
    space = check(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), "H5Screate_simple");
  }
  Handle lcpl = check(H5Pcreate(H5P_LINK_CREATE), "H5Pcreate");
  H5Pset_create_intermediate_group(lcpl.get(), 1);
  Handle d(H5Dcreate2(id(), name.c_str(), type, space.get(), lcpl.get(), dcpl.get(), H5P_DEFAULT));
  if (!d) fail("cannot create dataset " + name);
  size_t n = element_count(shape);
  if (n > 0 && data && H5Dwrite(d.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
    fail("cannot write dataset " + name);
  return Dataset(std::move(d), file_, join_path(path_, name));
}

Dataset Group::write_scalar(const std::string& name, double value) {
  return write_raw(name, H5T_NATIVE_DOUBLE, {}, &value);
}

Dataset Group::write_string(const std::string& name, const std::string& value) {
  Handle t = string_type();
  const char* p = value.c_str();
  return write_raw(name, t.get(), {}, &p);
}

Dataset Group::write_doubles(const std::string& name, const std::vector<double>& values,
                             const std::vector<uint64_t>& shape) {
  std::vector<uint64_t> s = shape.empty() ? std::vector<uint64_t>{values.size()} : shape;
  if (element_count(s) != values.size()) throw Error(file_ + ": " + name + ": shape does not match the values");
  return write_raw(name, H5T_NATIVE_DOUBLE, s, values.data());
}

Dataset Group::write_ints(const std::string& name, const std::vector<int64_t>& values) {
  return write_raw(name, H5T_NATIVE_INT64, {values.size()}, values.data());
}

Dataset Group::write_strings(const std::string& name, const std::vector<std::string>& values) {
  Handle t = string_type();
  std::vector<const char*> ptrs;
  for (auto& v : values) ptrs.push_back(v.c_str());
  return write_raw(name, t.get(), {values.size()}, ptrs.data());
}

// ---------------------------------------------------------------- seal

namespace {

constexpr char kSealMagic[] = "mambamt-hdf5-seal 1\n";
constexpr unsigned char kHdf5Signature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using FilePtr = std::unique_ptr<std::FILE, FileCloser>;

// CRC-32C of the bytes from `from` to the end, and the file's length.
std::pair<uint32_t, uint64_t> checksum_after(std::FILE* f, const std::string& path, uint64_t from) {
  if (std::fseek(f, static_cast<long>(from), SEEK_SET) != 0) throw Error(path + ": cannot seek");
  std::vector<char> buf(1 << 20);
  uint32_t crc = 0;
  uint64_t size = from;
  while (true) {
    size_t n = std::fread(buf.data(), 1, buf.size(), f);
    crc = crc32c(crc, buf.data(), n);
    size += n;
    if (n < buf.size()) break;
  }
  if (std::ferror(f)) throw Error(path + ": read error");
  return {crc, size};
}

// Seals a closed HDF5 file whose first kSealBytes are a user block: writes
// its length and the CRC-32C of the rest into the block.
void seal(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "r+b"));
  if (!f) throw Error(path + ": cannot open to seal: " + std::strerror(errno));
  unsigned char sig[8] = {};
  if (std::fseek(f.get(), static_cast<long>(kSealBytes), SEEK_SET) != 0 ||
      std::fread(sig, 1, sizeof sig, f.get()) != sizeof sig || std::memcmp(sig, kHdf5Signature, sizeof sig) != 0)
    throw Error(path + ": cannot seal: no HDF5 file after a " + std::to_string(kSealBytes) + "-byte user block");
  const auto [crc, size] = checksum_after(f.get(), path, kSealBytes);
  char block[kSealBytes] = {};
  std::snprintf(block, sizeof block, "%scrc32c %08x\nbytes %llu\n", kSealMagic, crc,
                static_cast<unsigned long long>(size));
  if (std::fseek(f.get(), 0, SEEK_SET) != 0 || std::fwrite(block, 1, sizeof block, f.get()) != sizeof block ||
      std::fflush(f.get()) != 0)
    throw Error(path + ": cannot write the seal: " + std::strerror(errno));
}

// Does the file start with a seal (whether it holds or not)?
bool sealed(const std::string& path) {
  FilePtr f(std::fopen(path.c_str(), "rb"));
  char head[sizeof kSealMagic - 1] = {};
  return f && std::fread(head, 1, sizeof head, f.get()) == sizeof head &&
         std::memcmp(head, kSealMagic, sizeof head) == 0;
}

// What is wrong with the seal of the file open as `f` (read from its start),
// for a message; "" when it holds, or when there is none (no user block: the
// file starts with the HDF5 signature, or is no HDF5 file at all).
std::string seal_error(std::FILE* f, const std::string& path) {
  char block[kSealBytes] = {};
  const size_t got = std::fread(block, 1, sizeof block, f);
  if (got < sizeof kHdf5Signature || std::memcmp(block, kHdf5Signature, sizeof kHdf5Signature) == 0) return "";
  const size_t magic = sizeof kSealMagic - 1;
  if (got < kSealBytes || std::memcmp(block, kSealMagic, magic) != 0) {
    // Not ours. A user block left empty is a created file that was never
    // sealed (its writer failed); anything else HDF5 judges.
    if (got == kSealBytes && std::all_of(block, block + kSealBytes, [](char c) { return c == 0; })) {
      unsigned char sig[8] = {};
      if (std::fread(sig, 1, sizeof sig, f) == sizeof sig && std::memcmp(sig, kHdf5Signature, 8) == 0)
        return "never sealed: the program writing it stopped before it finished the file";
    }
    return "";
  }
  unsigned crc_sealed = 0;
  unsigned long long size_sealed = 0;
  if (std::sscanf(block + magic, "crc32c %8x\nbytes %llu\n", &crc_sealed, &size_sealed) != 2)
    return "its seal (the first " + std::to_string(kSealBytes) + " bytes) is damaged";
  const auto [crc, size] = checksum_after(f, path, kSealBytes);
  if (size != size_sealed)
    return "damaged: " + std::to_string(size) + " bytes where " + std::to_string(size_sealed) +
           " were written" + (size < size_sealed ? " (cut short)" : "");
  if (crc != crc_sealed) {
    char msg[160];
    std::snprintf(msg, sizeof msg, "damaged: its bytes changed since they were written (CRC-32C %08x, sealed %08x)",
                  crc, crc_sealed);
    return msg;
  }
  return "";
}

// Are the file the seal was checked on and the file HDF5 opened the same one?
// fstat of the file HDF5 has open as `opened`.
struct stat stat_opened(hid_t opened, const std::string& path) {
  void* handle = nullptr;  // the sec2 driver's: a pointer to its descriptor
  struct stat st {};
  if (H5Fget_vfd_handle(opened, H5P_DEFAULT, &handle) < 0 || handle == nullptr)
    throw Error(path + ": cannot get HDF5's file descriptor: " + last_error());
  if (fstat(*static_cast<int*>(handle), &st) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  return st;
}

bool same_file(std::FILE* checked, hid_t opened, const std::string& path) {
  struct stat a {};
  if (fstat(fileno(checked), &a) != 0) throw Error(path + ": cannot stat: " + std::strerror(errno));
  const struct stat b = stat_opened(opened, path);
  return a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

}  // namespace

// ---------------------------------------------------------------- File

File::File(Handle h, std::string path, bool created)
    : h_(std::move(h)), path_(std::move(path)), created_(created), uncaught_(std::uncaught_exceptions()) {}

File::~File() {
  if (!h_) return;
  if (!created_ || std::uncaught_exceptions() > uncaught_) {
    h_.reset();  // a failed writer's file stays unsealed
    return;
  }
  try {
    close();
  } catch (const std::exception&) {
    // Unsealed, so it does not open: the failure shows where it is read.
  }
}

File File::create(const std::string& path, bool truncate) {
  init();
  Handle fcpl = check(H5Pcreate(H5P_FILE_CREATE), "H5Pcreate");
  // Track creation order so h5py/h5dump can list in write order if asked.
  H5Pset_link_creation_order(fcpl.get(), H5P_CRT_ORDER_TRACKED);
  H5Pset_userblock(fcpl.get(), kSealBytes);  // the seal's place
  // Closing the file closes its groups and datasets too, so the bytes are
  // all written when it is sealed.
  Handle fapl = check(H5Pcreate(H5P_FILE_ACCESS), "H5Pcreate");
  H5Pset_fclose_degree(fapl.get(), H5F_CLOSE_STRONG);
  Handle f(H5Fcreate(path.c_str(), truncate ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), fapl.get()));
  if (!f) throw Error(path + ": cannot create HDF5 file: " + last_error());
  return File(std::move(f), path, /*created=*/true);
}

File File::open(const std::string& path) {
  init();
  // The seal is checked on one open of the path and HDF5 opens it again. A
  // writer that renames a new file over the path in between would have
  // HDF5 read a file whose seal nobody checked, so the two opens must be of
  // the same file (device and inode); if not, the new file is checked.
  constexpr int kAttempts = 5;
  for (int attempt = 1;; ++attempt) {
    FilePtr checked(std::fopen(path.c_str(), "rb"));
    if (checked)
      if (std::string why = seal_error(checked.get(), path); !why.empty()) throw InputError(path + ": " + why);
    Handle f(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!f) throw InputError(path + ": cannot open HDF5 file: " + last_error());
    if (checked && same_file(checked.get(), f.get(), path)) return File(std::move(f), path, /*created=*/false);
    if (attempt == kAttempts)
      throw InputError(path + ": replaced by another file each time it was opened (" + std::to_string(kAttempts) +
                       " times)");
  }
}

bool File::is_hdf5(const std::string& path) {
  init();
  if (sealed(path)) return true;  // even when damaged: open() says how
  htri_t r = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  return r > 0;
}

Group File::root() const {
  Handle g(H5Gopen2(h_.get(), "/", H5P_DEFAULT));
  if (!g) throw Error(path_ + ": cannot open root group: " + last_error());
  return Group(std::move(g), path_, "/");
}

void File::flush() {
  if (H5Fflush(h_.get(), H5F_SCOPE_GLOBAL) < 0) throw Error(path_ + ": flush failed: " + last_error());
}

void File::close() {
  if (!h_) return;
  const herr_t rc = H5Fclose(h_.get());
  h_ = Handle();  // its id is dead now: nothing is closed twice
  if (rc < 0) throw Error(path_ + ": cannot close: " + last_error());
  if (created_) seal(path_);
}

// ---------------------------------------------------------------- sealing files on disk

bool has_seal(const std::string& path) { return sealed(path); }

std::string unsealed_advice(long long count, const std::string& dir) {
  return std::to_string(count) +
         " store(s) without a seal (written by h5py or an older mambamt), so damage to them is not caught: "
         "`mambamt store seal " + dir + "` seals them";
}

SealCheck check_seal(const std::string& path) {
  init();
  FilePtr f(std::fopen(path.c_str(), "rb"));
  if (!f) throw InputError(path + ": cannot open: " + std::strerror(errno));
  char block[kSealBytes] = {};
  const size_t got = std::fread(block, 1, sizeof block, f.get());
  if (std::ferror(f.get())) throw InputError(path + ": read error");
  const bool hdf5_here = got >= sizeof kHdf5Signature && std::memcmp(block, kHdf5Signature, sizeof kHdf5Signature) == 0;
  if (hdf5_here) return {SealState::none, ""};
  if (got >= sizeof kSealMagic - 1 && std::memcmp(block, kSealMagic, sizeof kSealMagic - 1) == 0) {
    std::rewind(f.get());
    std::string why = seal_error(f.get(), path);
    return {why.empty() ? SealState::holds : SealState::broken, why};
  }
  std::rewind(f.get());
  if (std::string why = seal_error(f.get(), path); !why.empty()) return {SealState::never_sealed, why};
  const htri_t is = H5Fis_hdf5(path.c_str());
  H5Eclear2(H5E_DEFAULT);
  if (is > 0) return {SealState::foreign, "its user block is another program's"};
  return {SealState::not_hdf5, "not an HDF5 file"};
}

namespace {

// Copies everything below root group `src` (of file `path`) into root group
// `dst`: the objects of hard links recursively with their attributes, soft
// and external links as links. One H5Ocopy of the whole group, so an object
// under two names (hard links within the file) stays one object; its copy is
// made under a name no link of `src` has, its links moved up to the root and
// that name removed.
void copy_links(hid_t src, hid_t dst, const std::string& path) {
  const std::vector<std::string> names = link_names(src);
  std::string scratch = ".mambamt-reseal";
  while (std::find(names.begin(), names.end(), scratch) != names.end()) scratch += "_";
  if (H5Ocopy(src, ".", dst, scratch.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
    throw InputError(path + ": cannot copy its objects: " + last_error());
  Handle copy(H5Gopen2(dst, scratch.c_str(), H5P_DEFAULT));
  if (!copy) throw Error(path + ": cannot open its copy: " + last_error());
  for (const auto& name : names)
    if (H5Lmove(copy.get(), name.c_str(), dst, name.c_str(), H5P_DEFAULT, H5P_DEFAULT) < 0)
      throw Error(path + ": /" + name + ": cannot move its copy to the root: " + last_error());
  copy = Handle();
  if (H5Ldelete(dst, scratch.c_str(), H5P_DEFAULT) < 0)
    throw Error(path + ": cannot remove the copy's group: " + last_error());
}

// Copies the attributes of object `src` (of file `path`, `bytes` long) to `dst`.
void copy_attributes(hid_t src, hid_t dst, const std::string& path, uint64_t bytes) {
  std::vector<std::string> names;
  H5Aiterate2(
      src, H5_INDEX_NAME, H5_ITER_INC, nullptr,
      [](hid_t, const char* n, const H5A_info_t*, void* data) -> herr_t {
        static_cast<std::vector<std::string>*>(data)->push_back(n);
        return 0;
      },
      &names);
  for (const auto& name : names) {
    const std::string where = path + ": attribute " + name + " of /: ";
    Handle a(H5Aopen(src, name.c_str(), H5P_DEFAULT));
    if (!a) throw InputError(where + "cannot open: " + last_error());
    Handle stored(H5Aget_type(a.get())), space(H5Aget_space(a.get()));
    if (!stored || !space) throw InputError(where + "cannot read its type and shape: " + last_error());
    Handle type = check(H5Tcopy(stored.get()), "H5Tcopy");  // transient, even if it was committed
    Handle mem(H5Tget_native_type(stored.get(), H5T_DIR_ASCEND));
    if (!mem) throw InputError(where + "a type mambamt cannot read: " + last_error());
    const hssize_t n = H5Sget_simple_extent_npoints(space.get());
    const size_t size = H5Tget_size(mem.get());
    if (n < 0 || size == 0 || static_cast<uint64_t>(n) > bytes)
      throw InputError(where + "damaged: its shape claims more elements than the file holds");
    std::vector<unsigned char> buf(static_cast<size_t>(n) * size + 1);
    if (H5Aread(a.get(), mem.get(), buf.data()) < 0) throw InputError(where + "cannot read: " + last_error());
    Handle b(H5Acreate2(dst, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const bool written = b && H5Awrite(b.get(), mem.get(), buf.data()) >= 0;
    const std::string why = written ? "" : last_error();
#if H5_VERSION_GE(1, 12, 0)
    H5Treclaim(mem.get(), space.get(), H5P_DEFAULT, buf.data());  // variable-length parts HDF5 allocated
#else
    H5Dvlen_reclaim(mem.get(), space.get(), H5P_DEFAULT, buf.data());
#endif
    if (!written) throw Error(where + "cannot write its copy: " + why);
  }
}

}  // namespace

void reseal(const std::string& path) {
  init();
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw InputError(path + ": cannot stat: " + std::strerror(errno));
  const FileIdentity before = file_identity(st);
  const std::string changed =
      path + ": changed while it was copied (a writer replaced it): left as that writer left it";
  replace_file_atomic(path, [&](const std::string& tmp) {
    {
      Handle src(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
      if (!src) throw InputError(path + ": cannot open HDF5 file: " + last_error());
      if (file_identity(stat_opened(src.get(), path)) != before) throw Error(changed);
      Handle src_root(H5Gopen2(src.get(), "/", H5P_DEFAULT));
      if (!src_root) throw InputError(path + ": cannot open the root group: " + last_error());
      File dst = File::create(tmp, /*truncate=*/true);
      {
        const Group root = dst.root();
        copy_links(src_root.get(), root.id(), path);
        copy_attributes(src_root.get(), root.id(), path, static_cast<uint64_t>(before.size));
      }
      dst.close();  // seals it
    }
    if (::chmod(tmp.c_str(), st.st_mode & 07777) != 0) throw Error(tmp + ": cannot chmod: " + std::strerror(errno));
    if (file_identity(path) != before) throw Error(changed);
  });
}

namespace {

struct ChildOutcome {
  pid_t pid = -1;
  std::string why;  // "" when the work was done
};

void write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  for (size_t at = 0; at < size;) {
    const ssize_t n = ::write(fd, p + at, size - at);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // the parent is gone
    at += static_cast<size_t>(n);
  }
}

// Runs work(i) for i in [0, n) in a child process, one item after the
// other, the child reporting each item done (with the message of what it
// threw) through a pipe. A crash of the child on item i, or no report of it
// within timeout(i) seconds (then the child is killed), is i's outcome, and
// a new child goes on from item i + 1: one fork for all the items a crash
// does not stop.
std::vector<ChildOutcome> run_in_children(size_t n, const std::function<void(size_t)>& work,
                                          const std::function<double(size_t)>& timeout, const std::string& what) {
  std::vector<ChildOutcome> out(n);
  size_t next = 0;
  while (next < n) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(what + ": cannot make a pipe to read it: " + std::strerror(errno));
    std::fflush(nullptr);  // nothing buffered is written twice
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      throw Error(what + ": cannot fork to read it: " + std::strerror(errno));
    }
    if (pid == 0) {
      ::close(fds[0]);
      // A crash is the child's death, which the parent reports, whatever
      // handlers the parent installed (a test framework's, say).
      for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTERM, SIGINT, SIGUSR1, SIGUSR2}) ::signal(sig, SIG_DFL);
      for (size_t i = next; i < n; ++i) {
        std::string why;
        try {
          work(i);
        } catch (const std::exception& e) {
          why = e.what();
          if (why.empty()) why = "failed";
        }
        const uint64_t head = why.size();  // a report of the next item: the message's length, the message
        write_all(fds[1], &head, sizeof head);
        write_all(fds[1], why.data(), why.size());
      }
      ::_exit(0);
    }
    ::close(fds[1]);
    size_t current = next;  // the item the child is on
    std::string buf;
    bool timed_out = false;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout(current));
    while (current < n) {
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        timed_out = true;
        break;
      }
      pollfd p{fds[0], POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>(std::min<long long>(left.count(), 1000)));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) continue;
      char chunk[4096];
      const ssize_t got = ::read(fds[0], chunk, sizeof chunk);
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) break;  // the child is gone
      buf.append(chunk, static_cast<size_t>(got));
      uint64_t head = 0;
      while (current < n && buf.size() >= sizeof head) {
        std::memcpy(&head, buf.data(), sizeof head);
        if (buf.size() < sizeof head + head) break;
        out[current] = {pid, buf.substr(sizeof head, head)};
        buf.erase(0, sizeof head + head);
        if (++current < n)
          deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout(current));
      }
    }
    ::close(fds[0]);
    if (timed_out) ::kill(pid, SIGKILL);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    if (current < n) {
      std::string why = "failed";
      if (timed_out) {
        std::ostringstream os;
        os << "HDF5 was still reading it after " << timeout(current)
           << " s: damaged (HDF5 loops on it), or the disk is that slow";
        why = os.str();
      } else if (WIFSIGNALED(status)) {
        why = "HDF5 crashed reading it (" + std::string(strsignal(WTERMSIG(status))) + "): it is damaged";
      }
      out[current] = {pid, why};
      ++current;
    }
    next = current;
  }
  return out;
}

// ExperimentStore::read's child for unsealed stores: 0 none, -1 with
// child_read_timeout, > 0 with these seconds.
std::atomic<double> g_unsealed_read_timeout{0.0};

}  // namespace

std::string in_child(const std::string& path, const std::function<void()>& work, double timeout_s) {
  const std::string why = run_in_children(1, [&](size_t) { work(); }, [&](size_t) { return timeout_s; }, path)[0].why;
  return after_file(path, why);
}

std::vector<std::string> in_children(const std::vector<std::string>& paths,
                                     const std::function<void(const std::string&)>& work,
                                     const std::function<double(const std::string&)>& timeout_s) {
  const std::vector<ChildOutcome> outcomes = run_in_children(
      paths.size(), [&](size_t i) { work(paths[i]); }, [&](size_t i) { return timeout_s(paths[i]); },
      paths.empty() ? std::string() : paths.front());
  std::vector<std::string> out;
  for (size_t i = 0; i < paths.size(); ++i) out.push_back(after_file(paths[i], outcomes[i].why));
  return out;
}

double child_read_timeout(uint64_t bytes) { return 30 + static_cast<double>(bytes) / 10e6; }

std::string reseal_in_child(const std::string& path, double timeout_s) {
  const ChildOutcome outcome =
      run_in_children(1, [&](size_t) { reseal(path); }, [&](size_t) { return timeout_s; }, path).front();
  if (!outcome.why.empty()) {
    // The child's copy, when it died before it could remove it.
    const fs::path file(path);
    const std::string prefix =
        "." + file.filename().string() + ".tmp." + host_name() + "." + std::to_string(outcome.pid) + ".";
    const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
    std::error_code ec;
    for (auto it = fs::directory_iterator(dir, ec); !ec && it != fs::directory_iterator(); it.increment(ec))
      if (it->path().filename().string().rfind(prefix, 0) == 0) fs::remove(it->path(), ec);
  }
  return after_file(path, outcome.why);
}

void set_unsealed_reads_in_child(bool on, double timeout_s) {
  g_unsealed_read_timeout = on ? (timeout_s > 0 ? timeout_s : -1.0) : 0.0;
}

double unsealed_read_child_timeout(uint64_t bytes) {
  const double t = g_unsealed_read_timeout;
  return t < 0 ? child_read_timeout(bytes) : t;
}

}  // namespace mambamt::core::h5
