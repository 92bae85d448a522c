#pragma once
// The data-parallel group of one experiment: MPI over a sub-communicator
// (RunOptions::group), or a single rank. Gradients are summed with one
// all-reduce of a flat buffer: MPI_Allreduce for CPU tensors; for CUDA tensors
// NCCL when the build has CUDA and libnccl can be loaded (a copy through host
// memory and MPI otherwise).
#include <mpi.h>
#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace mambamt::train {

class Group {
 public:
  // MPI_COMM_NULL: one rank, every collective is the identity. The
  // communicator is borrowed (the caller frees it).
  explicit Group(MPI_Comm comm = MPI_COMM_NULL);
  ~Group();
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  bool single() const { return size_ == 1; }
  bool is_root() const { return rank_ == 0; }

  // Sums the tensors in place over the group (float32/float64, one dtype and
  // device for all; they are flattened into one buffer for a single call).
  void allreduce_sum(const std::vector<torch::Tensor>& tensors);
  double allreduce_sum(double value);
  int64_t allreduce_sum(int64_t value);
  int64_t allreduce_max(int64_t value);
  // Copies rank 0's tensors into every rank's (in place).
  void broadcast(const std::vector<torch::Tensor>& tensors);
  // Rank 0's string on every rank.
  std::string broadcast(const std::string& value);
  // Every rank's bytes, on rank 0 (others get an empty vector).
  std::vector<std::vector<uint8_t>> gather(const std::vector<uint8_t>& bytes);
  // Rank 0 gives parts[r] to rank r; returns this rank's part.
  std::vector<uint8_t> scatter(const std::vector<std::vector<uint8_t>>& parts);
  void barrier();

  // "mpi" or "nccl" for CUDA gradients (what the log reports).
  std::string cuda_backend() const;

 private:
  void allreduce_cuda(torch::Tensor& flat);
  MPI_Comm comm_ = MPI_COMM_NULL;
  int rank_ = 0;
  int size_ = 1;
  struct Nccl;
  std::unique_ptr<Nccl> nccl_;
  bool nccl_tried_ = false;
};

}  // namespace mambamt::train
