// A rank program for the mapping tests: run as 2 ranks (tp group of 2), it applies every autograd
// mapping to rank-valued tensors and checks forward values and gradients against exact closed
// forms, the vocab-parallel cross-entropy against at::cross_entropy on the full logits, and the
// TP-aware dropout generators (same mask where replicated, different where sharded).
// Prints each mismatch; exit code 0 only when everything matched.
#include "parallel/mappings.h"
#include "parallel/process_groups.h"
#include "parallel/tp_layers.h"

#include <ATen/CPUGeneratorImpl.h>
#include <cstdio>

#include <functional>
#include <sstream>

using namespace gpttrain;

namespace {

int failures = 0;

void expectEqual(const char* what, const at::Tensor& got, const at::Tensor& want, int rank,
                 double tol = 0.0) {
  const bool ok = got.sizes().equals(want.sizes()) &&
                  (tol == 0.0 ? at::equal(got, want) : at::allclose(got, want, tol, tol));
  if (ok) return;
  ++failures;
  std::ostringstream out;
  out << "rank " << rank << " MISMATCH " << what << "\n got:  " << got << "\n want: " << want;
  std::fprintf(stderr, "%s\n", out.str().c_str());
}

at::Tensor rowIndex(int64_t rows, int64_t cols) {
  return at::arange(rows, at::kFloat).unsqueeze(1).expand({rows, cols}).contiguous();
}
at::Tensor colIndex(int64_t rows, int64_t cols) {
  return at::arange(cols, at::kFloat).unsqueeze(0).expand({rows, cols}).contiguous();
}

// Applies `map` to x (a leaf), backpropagates `upstream`, checks the output and x's gradient.
void check(const char* name, int rank, at::Tensor x,
           const std::function<at::Tensor(const at::Tensor&)>& map, const at::Tensor& upstream,
           const at::Tensor& want_out, const at::Tensor& want_grad) {
  x.set_requires_grad(true);
  at::Tensor y = map(x);
  expectEqual((std::string(name) + " forward").c_str(), y.detach(), want_out, rank);
  y.backward(upstream);
  expectEqual((std::string(name) + " backward").c_str(), x.grad(), want_grad, rank);
}

}  // namespace

int main() {
  LaunchEnv env = readLaunchEnv();
  if (env.world != 2) {
    std::fprintf(stderr, "mapping_check: run as 2 ranks (WORLD_SIZE=2)\n");
    return 2;
  }
  ProcessGroups groups = makeProcessGroups(env, 2, 1);
  const GroupPtr& tp = groups.tp;
  const int r = tp->rank;
  const float v = float(r + 1);  // this rank's value: 1 or 2; their sum is 3
  auto full = [](std::vector<int64_t> shape, float value) { return at::full(shape, value); };

  check(
      "copyToTp", r, full({4, 6}, v), [&](auto& x) { return copyToTp(x, tp); },
      full({4, 6}, 10 * v), full({4, 6}, v), full({4, 6}, 30));
  check(
      "reduceFromTp", r, full({4, 6}, v), [&](auto& x) { return reduceFromTp(x, tp); },
      full({4, 6}, 10 * v), full({4, 6}, 3), full({4, 6}, 10 * v));
  // Last dim 6 split in 2 x 3: rank r keeps columns [3r, 3r + 3).
  check(
      "scatterToTp", r, colIndex(4, 6), [&](auto& x) { return scatterToTp(x, tp); },
      full({4, 3}, 10 * v), colIndex(4, 3) + 3 * r,
      at::cat({full({4, 3}, 10), full({4, 3}, 20)}, 1));
  check(
      "gatherFromTp", r, full({4, 3}, v), [&](auto& x) { return gatherFromTp(x, tp); },
      colIndex(4, 6), at::cat({full({4, 3}, 1), full({4, 3}, 2)}, 1), colIndex(4, 3) + 3 * r);
  // Dim 0 (sequence) 4 split in 2 x 2: rank r keeps rows [2r, 2r + 2).
  check(
      "scatterToSeq", r, rowIndex(4, 2), [&](auto& x) { return scatterToSeq(x, tp); },
      full({2, 2}, 10 * v), rowIndex(2, 2) + 2 * r,
      at::cat({full({2, 2}, 10), full({2, 2}, 20)}, 0));
  check(
      "gatherFromSeq", r, full({2, 2}, v), [&](auto& x) { return gatherFromSeq(x, tp); },
      rowIndex(4, 2) * v, at::cat({full({2, 2}, 1), full({2, 2}, 2)}, 0),
      (rowIndex(2, 2) + 2 * r) * 3);
  check(
      "reduceScatterToSeq", r, rowIndex(4, 2) * v,
      [&](auto& x) { return reduceScatterToSeq(x, tp); }, full({2, 2}, v),
      (rowIndex(2, 2) + 2 * r) * 3, at::cat({full({2, 2}, 1), full({2, 2}, 2)}, 0));

  // Vocab-parallel cross-entropy against the full softmax: same logits on both ranks (seeded).
  at::Generator gen = at::make_generator<at::CPUGeneratorImpl>(42);
  at::Tensor logits = at::empty({5, 8}).normal_(0, 3, gen);
  at::Tensor targets = at::tensor({0, 3, 4, 7, 5}, at::kLong);
  at::Tensor full_logits = logits.clone().set_requires_grad(true);
  at::Tensor want = at::cross_entropy_loss(full_logits, targets, {}, at::Reduction::None);
  want.sum().backward();
  at::Tensor local = logits.chunk(2, 1)[r].clone().set_requires_grad(true);
  at::Tensor losses = vocabParallelCrossEntropy(local, targets, tp);
  expectEqual("vocabParallelCrossEntropy forward", losses.detach(), want.detach(), r, 1e-6);
  losses.sum().backward();
  expectEqual("vocabParallelCrossEntropy backward", local.grad(), full_logits.grad().chunk(2, 1)[r],
              r, 1e-6);

  // Dropout generators: the replicated one draws the same mask on both TP ranks, the sharded one
  // different masks.
  DropoutRng rng = makeDropoutRng(5, r, 0, torch::Device(torch::kCPU));
  at::Tensor replicated = allGather(*tp, dropout(at::ones({1, 256}), 0.5, &rng.replicated), 0);
  at::Tensor sharded = allGather(*tp, dropout(at::ones({1, 256}), 0.5, &rng.sharded), 0);
  expectEqual("replicated dropout mask equal on both ranks", replicated[1], replicated[0], r);
  if (at::equal(sharded[0], sharded[1])) {
    ++failures;
    std::fprintf(stderr, "rank %d MISMATCH: sharded dropout masks are equal on both ranks\n", r);
  }

  // Which implementations ran: Gloo must have used the fallbacks.
  const auto& counts = tp->counts;
  if (counts[int(CollectiveImpl::kAllGatherList)] == 0 ||
      counts[int(CollectiveImpl::kReduceScatterAllReduce)] == 0) {
    ++failures;
    std::fprintf(stderr, "rank %d MISMATCH: expected the Gloo fallbacks to be counted\n", r);
  }
  std::printf("rank %d: %d mismatches\n", r, failures);
  return failures == 0 ? 0 : 1;
}
