#include "core/checkpoint.h"

#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/fs.h"
#include "core/hdf5.h"

namespace fs = std::filesystem;

namespace mambamt::core {

namespace {

constexpr const char* kFormat = "mambamt-checkpoint";

struct DtypeInfo {
  torch::ScalarType dtype;
  const char* name;
  hid_t (*h5type)();
};

hid_t t_f32() { return H5T_NATIVE_FLOAT; }
hid_t t_f64() { return H5T_NATIVE_DOUBLE; }
hid_t t_u16() { return H5T_NATIVE_UINT16; }
hid_t t_i8() { return H5T_NATIVE_INT8; }
hid_t t_u8() { return H5T_NATIVE_UINT8; }
hid_t t_i16() { return H5T_NATIVE_INT16; }
hid_t t_i32() { return H5T_NATIVE_INT32; }
hid_t t_i64() { return H5T_NATIVE_INT64; }

// bfloat16, half and bool have no HDF5 type of their own: their bits are
// stored in an integer type of the same size and the attribute restores them.
const std::vector<DtypeInfo>& dtypes() {
  static const std::vector<DtypeInfo> v = {
      {torch::kFloat32, "float32", t_f32}, {torch::kFloat64, "float64", t_f64}, {torch::kBFloat16, "bfloat16", t_u16},
      {torch::kFloat16, "float16", t_u16}, {torch::kInt8, "int8", t_i8},         {torch::kUInt8, "uint8", t_u8},
      {torch::kInt16, "int16", t_i16},     {torch::kInt32, "int32", t_i32},      {torch::kInt64, "int64", t_i64},
      {torch::kBool, "bool", t_u8},
  };
  return v;
}

const DtypeInfo& info_for(torch::ScalarType t) {
  for (auto& d : dtypes())
    if (d.dtype == t) return d;
  throw Error(std::string("checkpoint: unsupported tensor dtype ") + c10::toString(t));
}

const DtypeInfo* info_for(const std::string& name) {
  for (auto& d : dtypes())
    if (name == d.name) return &d;
  return nullptr;
}

void collect_tensors(const h5::Group& g, const std::string& prefix, Checkpoint& out, const std::string& path) {
  for (auto& child : g.children()) {
    std::string name = prefix.empty() ? child : prefix + "/" + child;
    if (g.has_group(child)) {
      collect_tensors(g.group(child), name, out, path);
      continue;
    }
    h5::Dataset d = g.dataset(child);
    std::string dtype = d.attr_string_or("dtype", "");
    const DtypeInfo* info = info_for(dtype);
    if (!info) throw InputError(path + ": tensor " + name + " has unknown dtype \"" + dtype + "\"");
    std::vector<int64_t> shape;
    d.elements();  // a damaged shape fails here, naming the file, not in the allocation
    for (auto s : d.shape()) shape.push_back(static_cast<int64_t>(s));
    torch::Tensor t = torch::empty(shape, torch::TensorOptions().dtype(info->dtype));
    if (t.numel() > 0) d.read_raw(info->h5type(), t.data_ptr());
    out.tensors[name] = t;
  }
}

}  // namespace

void write_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  replace_file_atomic(path, [&](const std::string& tmp) {
    h5::File f = h5::File::create(tmp, /*truncate=*/true);
    h5::Group root = f.root();
    root.set_attr("format", kFormat);
    h5::Group tensors = root.create_group("tensors");
    for (auto& [name, tensor] : ckpt.tensors) {
      if (name.empty()) throw Error("checkpoint: empty tensor name");
      torch::Tensor t = tensor.detach().to(torch::kCPU).contiguous();
      const DtypeInfo& info = info_for(t.scalar_type());
      std::vector<uint64_t> shape(t.sizes().begin(), t.sizes().end());
      h5::Dataset d = tensors.write_raw(name, info.h5type(), shape, t.data_ptr());
      d.set_attr("dtype", std::string(info.name));
    }
    h5::Group meta = root.create_group("meta");
    for (auto& [k, v] : ckpt.ints) meta.set_attr(k, v);
    for (auto& [k, v] : ckpt.floats) meta.set_attr(k, v);
    for (auto& [k, v] : ckpt.strings) meta.set_attr(k, v);
    f.close();  // sealed (core/hdf5.h)
  });
}

Checkpoint read_checkpoint(const std::string& path) {
  if (!fs::exists(path)) throw InputError(path + ": no such checkpoint");
  if (!h5::File::is_hdf5(path)) throw InputError(path + ": not an HDF5 file");
  Checkpoint out;
  try {
    h5::File f = h5::File::open(path);
    h5::Group root = f.root();
    if (root.attr_string_or("format", "") != kFormat) throw InputError(path + ": not a mambamt checkpoint");
    collect_tensors(root.group("tensors"), "", out, path);
    h5::Group meta = root.group("meta");
    for (auto& name : meta.attr_names()) {
      h5::Handle a(H5Aopen(meta.id(), name.c_str(), H5P_DEFAULT));
      h5::Handle t(H5Aget_type(a.get()));
      switch (H5Tget_class(t.get())) {
        case H5T_INTEGER: out.ints[name] = meta.attr_int(name); break;
        case H5T_FLOAT: out.floats[name] = meta.attr_double(name); break;
        case H5T_STRING: out.strings[name] = meta.attr_string(name); break;
        default: throw InputError(path + ": meta attribute " + name + " has an unsupported type");
      }
    }
  } catch (const InputError&) {
    throw;
  } catch (const Error& e) {
    throw InputError(path + ": unreadable checkpoint: " + h5::after_file(path, e.what()));
  }
  return out;
}

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {}

std::string CheckpointDir::path_for_step(int64_t step) const {
  char buf[32];
  std::snprintf(buf, sizeof buf, "step_%08lld.h5", static_cast<long long>(step));
  return (fs::path(dir_) / buf).string();
}

std::string CheckpointDir::best_path() const { return (fs::path(dir_) / "best.h5").string(); }

std::vector<int64_t> CheckpointDir::steps() const {
  std::vector<int64_t> out;
  std::error_code ec;
  for (auto it = fs::directory_iterator(dir_, ec); !ec && it != fs::directory_iterator(); it.increment(ec)) {
    std::string n = it->path().filename().string();
    if (n.size() != 16 || n.rfind("step_", 0) != 0 || n.substr(13) != ".h5") continue;
    std::string digits = n.substr(5, 8);
    if (!std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    out.push_back(std::stoll(digits));
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::optional<int64_t> CheckpointDir::latest_step() const {
  auto s = steps();
  if (s.empty()) return std::nullopt;
  return s.back();
}

std::optional<CheckpointDir::Readable> CheckpointDir::latest_readable(
    const std::function<void(const std::string&, const std::string&)>& skipped) const {
  const std::vector<int64_t> all = steps();
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    const std::string path = path_for_step(*it);
    try {
      return Readable{*it, path, read_checkpoint(path)};
    } catch (const InputError& e) {
      const std::string aside = set_aside_unreadable(path);
      if (skipped) skipped(path, e.what() + std::string(" (set aside as ") + aside + ")");
    }
  }
  return std::nullopt;
}

namespace {

// Whether an HDF5 file opens (a truncated one does not), with the error.
std::string open_error(const std::string& path) {
  try {
    h5::File::open(path);
    return "";
  } catch (const std::exception& e) {
    return e.what();
  }
}

}  // namespace

std::string CheckpointDir::repair_best(int64_t best_step) const {
  const std::string best = best_path();
  if (!fs::exists(best)) return "";
  const std::string error = open_error(best);
  if (error.empty()) return "";
  const std::string step_file = path_for_step(best_step);
  if (best_step <= 0 || !fs::exists(step_file) || !open_error(step_file).empty())
    return error + "; the best step's file (" + step_file + ") is not kept or does not open either: left as it is";
  const std::string aside = set_aside_unreadable(best);
  replace_file_atomic(best, [&](const std::string& tmp) { fs::copy_file(step_file, tmp); });
  return error + "; set aside as " + aside + " and copied again from " + step_file;
}

void CheckpointDir::save(int64_t step, const Checkpoint& ckpt, int64_t keep_last, bool is_best) {
  make_dirs(dir_);
  remove_stale_temp_files(dir_);
  write_checkpoint(path_for_step(step), ckpt);
  if (is_best) {
    // A copy, not a link: pruning the step file must not touch the best one.
    replace_file_atomic(best_path(), [&](const std::string& tmp) { fs::copy_file(path_for_step(step), tmp); });
  }
  auto all = steps();
  if (keep_last < 1) keep_last = 1;
  for (size_t i = 0; i + static_cast<size_t>(keep_last) < all.size(); ++i) {
    std::error_code ec;
    fs::remove(path_for_step(all[i]), ec);
  }
}

}  // namespace mambamt::core
