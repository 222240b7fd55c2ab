// Sequence-parallel gradient sums and the TP-aware global gradient norm (see tp_grads.h).
#include "parallel/tp_grads.h"

#include "tracerun/torch_compat.h"

#include <cmath>
#include <optional>
#include <vector>

namespace gpttrain {

void syncSequenceParallelGrads(ParamSet& params, Group& tp, bool sp) {
  if (!sp || tp.size == 1) return;
  std::vector<at::Tensor> grads;
  for (auto& e : params.entries()) {
    if (e.split_dim < 0) grads.push_back(e.tensor.mutable_grad());
  }
  if (grads.empty()) return;
  std::vector<at::Tensor> flat_parts;
  for (auto& g : grads) flat_parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(flat_parts);
  allReduce(tp, flat);
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

void syncTiedEmbeddingGrads(ParamSet& params, Group& embedding) {
  if (embedding.size == 1) return;
  for (auto& e : params.entries()) {
    if (e.name == "embedding.word.weight") allReduce(embedding, e.tensor.mutable_grad());
  }
}

double clipGradNorm(ParamSet& params, Group& tp, Group& pp, double max_norm) {
  at::Tensor sum = at::zeros({1}, at::TensorOptions(at::kDouble).device(params.device()));
  std::vector<at::Tensor> counted;
  for (auto& e : params.entries()) {
    if (e.duplicate) continue;
    if (e.split_dim < 0 && tp.rank != 0) continue;  // replicated: rank 0 of TP counts it
    counted.push_back(e.tensor.grad());
  }
  // CUDA: one multi-tensor kernel for every gradient's norm (fp32 sums), where this libtorch can
  // give a bf16 list's norms in fp32 (torch_compat.h); the per-tensor path launches four kernels
  // per parameter.
  std::optional<std::vector<at::Tensor>> norms;
  if (params.device().is_cuda() && !counted.empty())
    norms = tracerun::compat::foreachNormsFloat(counted);
  if (norms) {
    sum += at::stack(*norms).to(at::kDouble).pow(2).sum();
  } else {
    for (const at::Tensor& g : counted) sum += g.to(at::kDouble).pow(2).sum();
  }
  allReduce(tp, sum);
  allReduce(pp, sum);
  const double norm = std::sqrt(sum.item<double>());
  if (max_norm > 0 && norm > max_norm) {
    const double scale = max_norm / (norm + 1e-6);
    std::vector<at::Tensor> grads;
    for (auto& e : params.entries()) grads.push_back(e.tensor.mutable_grad());
    if (params.device().is_cuda()) {
      at::_foreach_mul_(grads, scale);
    } else {
      for (at::Tensor& g : grads) g.mul_(scale);
    }
  }
  return norm;
}

}  // namespace gpttrain
