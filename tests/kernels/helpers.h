#pragma once
// Shared helpers of the kernel tests: gradients of a random projection of the
// outputs, and tensor comparison with a readable failure message.
#include <catch2/catch.hpp>
#include <torch/torch.h>

#include <sstream>
#include <string>
#include <vector>

namespace mambamt::kernels::test {

// Max |a-b| relative to max |b| (plus atol), with the worst place, for messages.
inline std::string diff_report(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs();
  const double m = d.max().item<double>();
  const double scale = b.to(torch::kDouble).abs().max().item<double>();
  return "max abs diff " + std::to_string(m) + " (max |ref| " + std::to_string(scale) + ")";
}

// a and b agree: |a-b| <= atol + rtol * max|b| everywhere (a scale-aware test
// for outputs that mix large and tiny entries).
inline bool close(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  torch::Tensor d = (a.to(torch::kDouble) - b.to(torch::kDouble)).abs();
  const double scale = b.to(torch::kDouble).abs().max().item<double>();
  return d.max().item<double>() <= atol + rtol * scale;
}

#define MAMBAMT_CHECK_CLOSE(a, b, rtol, atol)                                  \
  do {                                                                         \
    INFO(#a " vs " #b ": " << mambamt::kernels::test::diff_report((a), (b))); \
    CHECK(mambamt::kernels::test::close((a), (b), (rtol), (atol)));            \
  } while (0)

// a and b agree element by element: |a-b| <= atol + rtol * |b| at every
// place (torch.allclose's rule). For reduced precision (bf16, fp16), where a
// bound scaled by the tensor's largest entry lets its small entries be wrong.
inline bool allclose(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined()) return a.defined() == b.defined();
  if (a.sizes() != b.sizes()) return false;
  if (a.numel() == 0) return true;
  const torch::Tensor a64 = a.to(torch::kDouble), b64 = b.to(torch::kDouble);
  return ((a64 - b64).abs() <= atol + rtol * b64.abs()).all().item<bool>();
}

// The place where |a-b| exceeds its allowance atol + rtol * |b| most, for messages.
inline std::string allclose_report(const torch::Tensor& a, const torch::Tensor& b, double rtol, double atol) {
  if (!a.defined() || !b.defined() || a.sizes() != b.sizes() || a.numel() == 0) return "shapes differ or empty";
  const torch::Tensor a64 = a.to(torch::kDouble).flatten(), b64 = b.to(torch::kDouble).flatten();
  const torch::Tensor ratio = (a64 - b64).abs() / (atol + rtol * b64.abs());
  const int64_t i = ratio.argmax().item<int64_t>();
  std::vector<int64_t> place;
  for (int64_t k = a.dim() - 1, rest = i; k >= 0; --k) {
    place.insert(place.begin(), rest % a.size(k));
    rest /= a.size(k);
  }
  std::ostringstream out;
  out << "worst at " << torch::IntArrayRef(place) << ": " << a64[i].item<double>() << " against "
      << b64[i].item<double>() << ", " << ratio[i].item<double>() << " times the allowance";
  return out.str();
}

#define MAMBAMT_CHECK_ALLCLOSE(a, b, rtol, atol)                                                \
  do {                                                                                          \
    INFO(#a " vs " #b ": " << mambamt::kernels::test::allclose_report((a), (b), (rtol), (atol))); \
    CHECK(mambamt::kernels::test::allclose((a), (b), (rtol), (atol)));                          \
  } while (0)

// Gradients of sum_i <outputs_i, weights_i> with respect to inputs (undefined
// entries of inputs give undefined gradients).
inline std::vector<torch::Tensor> grads_of(const std::vector<torch::Tensor>& outputs,
                                           const std::vector<torch::Tensor>& weights,
                                           const std::vector<torch::Tensor>& inputs) {
  torch::Tensor loss;
  for (size_t i = 0; i < outputs.size(); ++i) {
    if (!outputs[i].defined()) continue;
    torch::Tensor term = (outputs[i].to(torch::kDouble) * weights[i].to(torch::kDouble)).sum();
    loss = loss.defined() ? loss + term : term;
  }
  std::vector<torch::Tensor> defined;
  for (const auto& t : inputs)
    if (t.defined()) defined.push_back(t);
  auto g = torch::autograd::grad({loss}, defined, {}, false, false, true);
  std::vector<torch::Tensor> out;
  size_t j = 0;
  for (const auto& t : inputs) out.push_back(t.defined() ? g[j++] : torch::Tensor());
  return out;
}

// A fresh leaf copy that requires grad (undefined stays undefined).
inline torch::Tensor leaf(const torch::Tensor& t) {
  return t.defined() ? t.detach().clone().requires_grad_(true) : t;
}

}  // namespace mambamt::kernels::test
