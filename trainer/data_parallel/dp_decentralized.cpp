// Bagua's decentralized SGD (--dp-algorithm decentralized; ZeRO stage 0 otherwise): no gradient
// reduction at all. Each rank steps on its own gradient, then averages its weights with one peer:
// (w_self + w_peer) / 2, the same bits on both. The peers of step t pair the lower half of the DP
// ranks with the upper half, shifted by t ("shift one", Bagua's default): rank r < n/2 meets
// n/2 + (t + r) mod n/2, so over n/2 steps every lower rank meets every upper one. The exchange
// runs over DP point-to-point (send/recv), one bucket of weights at a time; there is no global
// all-reduce. It needs an even DP size (config.cpp refuses others).
#include "data_parallel/dp_strategy.h"

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

constexpr int kWeightTag = 7 << 20;  // + bucket: the weight exchange's messages

class Decentralized final : public ReplicatedStrategy {
 public:
  Decentralized(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : ReplicatedStrategy(params, std::move(dp), BucketLayout{bucket_bytes, 1, 0, false}) {
    for (GradBucket& b : buckets_.all()) buckets_.allocateGrads(b, buckets_.options(b));
  }

  int zeroStage() const override { return 0; }
  ZeroMemoryModel memoryModel() const override { return {false, false, false}; }

  void beginStep() override {
    for (GradBucket& b : buckets_.all()) b.flat.zero_();
  }
  void finish() override {}  // the gradients stay this rank's own

  void afterOptimizerStep(int step) override {
    const int n = dp_->size;
    if (n == 1) return;
    const int peer = decentralizedPeer(dp_->rank, n, step);
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      GradBucket& b = buckets_[i];
      tracerun::Scope scope("dp_decentralized_average",
                            {{vocab::arg::kBucket, int64_t(i)},
                             {"peer", int64_t(dp_->global_ranks[peer])},
                             {vocab::arg::kBytes, b.numel * int64_t(sizeof(float))}});
      std::vector<at::Tensor> pieces;
      for (const BucketMember& m : b.members) {
        pieces.push_back(params().entries()[m.param].tensor.reshape({-1}).to(at::kFloat));
      }
      at::Tensor mine = at::cat(pieces);
      auto sent = sendAsync(*dp_, mine, peer, kWeightTag + int(i));
      at::Tensor theirs = recv(*dp_, {b.numel}, mine.device(), peer, kWeightTag + int(i));
      sent->wait();
      at::Tensor average = (mine + theirs).mul_(0.5);  // commutative: the same bits on both
      for (const BucketMember& m : b.members) {
        at::Tensor& p = params().entries()[m.param].tensor;
        p.copy_(average.narrow(0, m.offset, m.numel).view(p.sizes()));
      }
    }
  }
};

}  // namespace

int decentralizedPeer(int rank, int n, int step) {
  const int half = n / 2;
  if (rank < half) return half + (step + rank) % half;
  return ((rank - half - step) % half + half) % half;
}

std::unique_ptr<DataParallelStrategy> makeDecentralized(ParamSet& params, GroupPtr dp,
                                                        int64_t bucket_bytes) {
  return std::make_unique<Decentralized>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
