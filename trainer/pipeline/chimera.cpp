// Chimera's chunks and its mirror-pair gradient sum (see chimera.h).
#include "pipeline/chimera.h"

#include "data_parallel/grad_buckets.h"

#include <algorithm>

namespace gpttrain {

namespace {
constexpr const char* kHeadCopy = "embedding.word.weight.head";
}

std::vector<GptStage> makeChimeraChunks(ParamSet& params, const ModelConfig& model, int layers,
                                        int stages, const ProcessGroups& groups) {
  const int rank = groups.coords.pp, per_stage = layers / stages;
  const int down = rank, up = stages - 1 - rank;
  std::vector<GptStage> chunks;
  for (int stage : {std::min(down, up), std::max(down, up)}) {
    chunks.emplace_back(params, model, groups.tp, stage * per_stage, per_stage, stage == 0,
                        stage == stages - 1);
  }
  if (up < down) std::swap(chunks[0], chunks[1]);
  bool seen = false;
  for (auto& e : params.entries()) {
    if (e.name == kTiedEmbeddingName) {
      if (seen) {
        e.name = kHeadCopy;
        e.duplicate = true;
      }
      seen = true;
    }
    if (rank >= stages / 2) e.duplicate = true;
  }
  return chunks;
}

void syncChimeraGrads(ParamSet& params, Group& mirror) {
  at::NoGradGuard no_grad;
  at::Tensor tied, head;
  std::vector<at::Tensor> grads;
  for (auto& e : params.entries()) {
    grads.push_back(e.tensor.mutable_grad());
    if (e.name == kTiedEmbeddingName) tied = grads.back();
    if (e.name == kHeadCopy) head = grads.back();
  }
  if (tied.defined() && head.defined()) {
    tied.add_(head);
    head.copy_(tied);
  }
  if (mirror.size == 1 || grads.empty()) return;
  std::vector<at::Tensor> parts;
  for (auto& g : grads) parts.push_back(g.reshape({-1}));
  at::Tensor flat = at::cat(parts);
  allReduce(mirror, flat);
  int64_t offset = 0;
  for (auto& g : grads) {
    g.copy_(flat.narrow(0, offset, g.numel()).view(g.sizes()));
    offset += g.numel();
  }
}

}  // namespace gpttrain
