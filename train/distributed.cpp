#include "train/distributed.h"

#include <climits>
#include <map>

#include "core/error.h"

#ifdef MAMBAMT_WITH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <dlfcn.h>
#endif

namespace mambamt::train {

namespace {

void check_mpi(int rc, const char* what) {
  if (rc != MPI_SUCCESS) throw Error(std::string("MPI error in ") + what + " (code " + std::to_string(rc) + ")");
}

MPI_Datatype mpi_type(torch::ScalarType t) {
  switch (t) {
    case torch::kFloat32: return MPI_FLOAT;
    case torch::kFloat64: return MPI_DOUBLE;
    case torch::kInt64: return MPI_INT64_T;
    case torch::kInt32: return MPI_INT32_T;
    case torch::kUInt8: return MPI_UINT8_T;
    default: throw Error(std::string("all-reduce: unsupported dtype ") + c10::toString(t));
  }
}

// The tensors as one contiguous buffer (a copy), and back.
torch::Tensor flatten(const std::vector<torch::Tensor>& ts) {
  std::vector<torch::Tensor> flat;
  flat.reserve(ts.size());
  for (auto& t : ts) flat.push_back(t.detach().reshape({-1}));
  return torch::cat(flat);
}

void unflatten(const torch::Tensor& flat, const std::vector<torch::Tensor>& ts) {
  torch::NoGradGuard no_grad;
  int64_t off = 0;
  for (auto& t : ts) {
    const int64_t n = t.numel();
    torch::Tensor dst = t;
    dst.copy_(flat.narrow(0, off, n).view(t.sizes()));
    off += n;
  }
}

// MPI counts are ints: large buffers go in pieces.
void mpi_allreduce_inplace(void* data, int64_t count, MPI_Datatype type, size_t elem, MPI_Op op, MPI_Comm comm) {
  char* p = static_cast<char*>(data);
  while (count > 0) {
    const int n = static_cast<int>(std::min<int64_t>(count, INT_MAX / 2));
    check_mpi(MPI_Allreduce(MPI_IN_PLACE, p, n, type, op, comm), "MPI_Allreduce");
    p += static_cast<size_t>(n) * elem;
    count -= n;
  }
}

void mpi_bcast(void* data, int64_t count, MPI_Datatype type, size_t elem, MPI_Comm comm) {
  char* p = static_cast<char*>(data);
  while (count > 0) {
    const int n = static_cast<int>(std::min<int64_t>(count, INT_MAX / 2));
    check_mpi(MPI_Bcast(p, n, type, 0, comm), "MPI_Bcast");
    p += static_cast<size_t>(n) * elem;
    count -= n;
  }
}

}  // namespace

#ifdef MAMBAMT_WITH_CUDA
// NCCL loaded at run time (libnccl.so.2, which CUDA builds of PyTorch ship), so
// the binary neither links it nor needs its headers; the few types and
// functions used are declared here with NCCL's ABI.
struct Group::Nccl {
  using Comm = void*;
  struct UniqueId {
    char internal[128];
  };
  using GetUniqueId = int (*)(UniqueId*);
  using CommInitRank = int (*)(Comm*, int, UniqueId, int);
  using AllReduce = int (*)(const void*, void*, size_t, int, int, Comm, cudaStream_t);
  using CommDestroy = int (*)(Comm);
  static constexpr int kFloat32 = 7, kFloat64 = 8, kSum = 0;

  void* lib = nullptr;
  Comm comm = nullptr;
  AllReduce all_reduce = nullptr;
  CommDestroy destroy = nullptr;

  ~Nccl() {
    if (comm && destroy) destroy(comm);
  }
};
#else
struct Group::Nccl {};
#endif

Group::Group(MPI_Comm comm) : comm_(comm) {
  if (comm_ != MPI_COMM_NULL) {
    check_mpi(MPI_Comm_rank(comm_, &rank_), "MPI_Comm_rank");
    check_mpi(MPI_Comm_size(comm_, &size_), "MPI_Comm_size");
  }
}

Group::~Group() = default;

std::string Group::cuda_backend() const { return nccl_ ? "nccl" : "mpi"; }

void Group::allreduce_sum(const std::vector<torch::Tensor>& tensors) {
  if (single() || tensors.empty()) return;
  torch::Tensor flat = flatten(tensors);
  if (flat.is_cuda()) {
    allreduce_cuda(flat);
  } else {
    flat = flat.contiguous();
    mpi_allreduce_inplace(flat.data_ptr(), flat.numel(), mpi_type(flat.scalar_type()), flat.element_size(), MPI_SUM,
                          comm_);
  }
  unflatten(flat, tensors);
}

void Group::allreduce_cuda(torch::Tensor& flat) {
#ifdef MAMBAMT_WITH_CUDA
  if (!nccl_tried_) {
    nccl_tried_ = true;
    // Every rank must agree on using NCCL: each says whether it could load it.
    auto n = std::make_unique<Nccl>();
    n->lib = dlopen("libnccl.so.2", RTLD_NOW | RTLD_GLOBAL);
    if (!n->lib) n->lib = dlopen("libnccl.so", RTLD_NOW | RTLD_GLOBAL);
    Nccl::GetUniqueId get_id = nullptr;
    Nccl::CommInitRank init = nullptr;
    if (n->lib) {
      get_id = reinterpret_cast<Nccl::GetUniqueId>(dlsym(n->lib, "ncclGetUniqueId"));
      init = reinterpret_cast<Nccl::CommInitRank>(dlsym(n->lib, "ncclCommInitRank"));
      n->all_reduce = reinterpret_cast<Nccl::AllReduce>(dlsym(n->lib, "ncclAllReduce"));
      n->destroy = reinterpret_cast<Nccl::CommDestroy>(dlsym(n->lib, "ncclCommDestroy"));
    }
    const int64_t ok = (get_id && init && n->all_reduce && n->destroy) ? 1 : 0;
    int64_t all_ok = ok;
    check_mpi(MPI_Allreduce(&ok, &all_ok, 1, MPI_INT64_T, MPI_MIN, comm_), "MPI_Allreduce");
    if (all_ok) {
      Nccl::UniqueId id{};
      if (rank_ == 0 && get_id(&id) != 0) throw Error("ncclGetUniqueId failed");
      check_mpi(MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, comm_), "MPI_Bcast");
      if (init(&n->comm, size_, id, rank_) != 0) throw Error("ncclCommInitRank failed");
      nccl_ = std::move(n);
    }
  }
  if (nccl_) {
    const int type = flat.scalar_type() == torch::kFloat64 ? Nccl::kFloat64 : Nccl::kFloat32;
    if (flat.scalar_type() != torch::kFloat32 && flat.scalar_type() != torch::kFloat64)
      throw Error("NCCL all-reduce: float32 or float64 expected");
    flat = flat.contiguous();
    cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
    if (nccl_->all_reduce(flat.data_ptr(), flat.data_ptr(), static_cast<size_t>(flat.numel()), type, Nccl::kSum,
                          nccl_->comm, stream) != 0)
      throw Error("ncclAllReduce failed");
    return;
  }
#endif
  // Through host memory.
  torch::Tensor host = flat.to(torch::kCPU).contiguous();
  mpi_allreduce_inplace(host.data_ptr(), host.numel(), mpi_type(host.scalar_type()), host.element_size(), MPI_SUM,
                        comm_);
  flat.copy_(host);
}

double Group::allreduce_sum(double value) {
  if (single()) return value;
  double out = 0;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_SUM, comm_), "MPI_Allreduce");
  return out;
}

int64_t Group::allreduce_sum(int64_t value) {
  if (single()) return value;
  int64_t out = 0;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Allreduce");
  return out;
}

int64_t Group::allreduce_max(int64_t value) {
  if (single()) return value;
  int64_t out = 0;
  check_mpi(MPI_Allreduce(&value, &out, 1, MPI_INT64_T, MPI_MAX, comm_), "MPI_Allreduce");
  return out;
}

void Group::broadcast(const std::vector<torch::Tensor>& tensors) {
  if (single() || tensors.empty()) return;
  // Grouped by dtype: one buffer per dtype.
  std::map<torch::ScalarType, std::vector<torch::Tensor>> by_type;
  for (auto& t : tensors) by_type[t.scalar_type()].push_back(t);
  for (auto& [type, ts] : by_type) {
    torch::Tensor host = flatten(ts).to(torch::kCPU).contiguous();
    mpi_bcast(host.data_ptr(), host.numel(), mpi_type(type), host.element_size(), comm_);
    unflatten(host.to(ts.front().device()), ts);
  }
}

std::string Group::broadcast(const std::string& value) {
  if (single()) return value;
  int64_t n = rank_ == 0 ? static_cast<int64_t>(value.size()) : 0;
  check_mpi(MPI_Bcast(&n, 1, MPI_INT64_T, 0, comm_), "MPI_Bcast");
  std::string out = rank_ == 0 ? value : std::string(static_cast<size_t>(n), '\0');
  mpi_bcast(out.data(), n, MPI_CHAR, 1, comm_);
  return out;
}

std::vector<std::vector<uint8_t>> Group::gather(const std::vector<uint8_t>& bytes) {
  if (single()) return {bytes};
  int n = static_cast<int>(bytes.size());
  std::vector<int> sizes(static_cast<size_t>(size_));
  check_mpi(MPI_Gather(&n, 1, MPI_INT, sizes.data(), 1, MPI_INT, 0, comm_), "MPI_Gather");
  std::vector<int> displs(static_cast<size_t>(size_), 0);
  int total = 0;
  for (int r = 0; r < size_; ++r) {
    displs[r] = total;
    total += sizes[r];
  }
  std::vector<uint8_t> all(rank_ == 0 ? static_cast<size_t>(total) : 0);
  check_mpi(MPI_Gatherv(bytes.data(), n, MPI_BYTE, all.data(), sizes.data(), displs.data(), MPI_BYTE, 0, comm_),
            "MPI_Gatherv");
  std::vector<std::vector<uint8_t>> out;
  if (rank_ != 0) return out;
  for (int r = 0; r < size_; ++r)
    out.emplace_back(all.begin() + displs[r], all.begin() + displs[r] + sizes[r]);
  return out;
}

std::vector<uint8_t> Group::scatter(const std::vector<std::vector<uint8_t>>& parts) {
  if (single()) return parts.empty() ? std::vector<uint8_t>{} : parts[0];
  std::vector<int> sizes(static_cast<size_t>(size_), 0), displs(static_cast<size_t>(size_), 0);
  std::vector<uint8_t> all;
  if (rank_ == 0) {
    if (static_cast<int>(parts.size()) != size_) throw Error("scatter: one part per rank expected");
    for (int r = 0; r < size_; ++r) {
      sizes[r] = static_cast<int>(parts[r].size());
      displs[r] = static_cast<int>(all.size());
      all.insert(all.end(), parts[r].begin(), parts[r].end());
    }
  }
  int n = 0;
  check_mpi(MPI_Scatter(sizes.data(), 1, MPI_INT, &n, 1, MPI_INT, 0, comm_), "MPI_Scatter");
  std::vector<uint8_t> out(static_cast<size_t>(n));
  check_mpi(MPI_Scatterv(all.data(), sizes.data(), displs.data(), MPI_BYTE, out.data(), n, MPI_BYTE, 0, comm_),
            "MPI_Scatterv");
  return out;
}

void Group::barrier() {
  if (!single()) check_mpi(MPI_Barrier(comm_), "MPI_Barrier");
}

}  // namespace mambamt::train
