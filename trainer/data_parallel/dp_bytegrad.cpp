// Bagua's ByteGrad (--dp-algorithm bytegrad; ZeRO stage 0 otherwise): full parameters, gradients
// and optimizer states on every rank, as plain DDP, but each gradient bucket travels compressed
// to 8 bits (bytegrad_codec.h). A bucket is cut in one chunk per DP rank; each chunk is compressed
// with its own min and max and sent to the rank that owns it (all-to-all: the scatter-reduce's
// exchange), which decompresses the DP copies of its chunk, averages them, compresses the average
// and all-gathers it; every rank decompresses the gathered chunks into the bucket. The exchange of
// a bucket is launched from the AccumulateGrad hooks in bucket order (overlapping backward); the
// averaging and the all-gather run in finish(). Host memory only (Gloo); no error feedback.
#include "data_parallel/bytegrad_codec.h"
#include "data_parallel/dp_strategy.h"

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

class ByteGrad final : public ReplicatedStrategy {
 public:
  ByteGrad(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
      : ReplicatedStrategy(params, dp, BucketLayout{bucket_bytes, dp->size, dp->rank, false}) {
    const int n = dp_->size;
    for (GradBucket& b : buckets_.all()) {
      buckets_.allocateGrads(b, buckets_.options(b));
      Exchange e;
      const int64_t chunk = compressedChunkBytes(b.shard_size);
      const auto bytes = at::TensorOptions(at::kByte);
      e.send = at::empty({n * chunk}, bytes);
      e.recv = at::empty({n * chunk}, bytes);
      e.mine = at::empty({chunk}, bytes);
      exchanges_.push_back(std::move(e));
    }
    if (n > 1) {
      hooks_ = std::make_unique<AccumulateHooks>(params, nullptr,
                                                 [this](size_t param) { onGradient(param); });
    }
  }

  int zeroStage() const override { return 0; }
  ZeroMemoryModel memoryModel() const override { return {false, false, false}; }

  void beginStep() override {
    buckets_.beginInOrderStep();
    next_launch_ = 0;
  }
  void finish() override {
    if (dp_->size == 1) return;
    for (GradBucket& b : buckets_.all()) b.pending = 0;  // parameters that got no gradient
    launchReady(/*after_backward=*/true);
    for (size_t i = 0; i < buckets_.size(); ++i) reduceAndGather(i);
  }

 private:
  // One bucket's compressed buffers: what this rank sends (every chunk), receives (the DP copies
  // of its chunk), and its compressed average; work is the exchange in flight.
  struct Exchange {
    at::Tensor send, recv, mine;
    c10::intrusive_ptr<c10d::Work> work;
  };

  void onGradient(size_t param) {
    if (!last_microbatch_) return;
    GradBucket& b = buckets_[buckets_.bucketOf(param)];
    if (b.pending > 0) --b.pending;
    launchReady(/*after_backward=*/false);
  }

  void launchReady(bool after_backward) {
    while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
      launchExchange(next_launch_++);
      buckets_.countLaunch(after_backward);
    }
  }

  // The gradient as host fp32 (a copy unless it already is).
  static at::Tensor hostFloat(const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == at::kFloat ? t : t.to(at::kCPU, at::kFloat);
  }

  // Compresses every chunk of bucket i and sends chunk r to rank r (all-to-all).
  void launchExchange(size_t i) {
    GradBucket& b = buckets_[i];
    Exchange& e = exchanges_[i];
    const int64_t chunk = compressedChunkBytes(b.shard_size);
    tracerun::Scope scope("dp_bytegrad_scatter", {{vocab::arg::kBucket, int64_t(i)},
                                                  {vocab::arg::kBytes, int64_t(e.send.nbytes())}});
    const at::Tensor grad = hostFloat(b.flat);
    const float* x = grad.data_ptr<float>();
    uint8_t* out = e.send.data_ptr<uint8_t>();
    for (int r = 0; r < dp_->size; ++r) {
      compressChunk(x + r * b.shard_size, b.shard_size, out + r * chunk);
    }
    std::vector<int64_t> splits;  // empty: equal splits
    e.work = dp_->pg->alltoall_base(e.recv, e.send, splits, splits);
  }

  // Averages this rank's chunk over the DP copies, compresses it, all-gathers the compressed
  // averages and decompresses all of them into the bucket.
  void reduceAndGather(size_t i) {
    GradBucket& b = buckets_[i];
    Exchange& e = exchanges_[i];
    const int64_t chunk = compressedChunkBytes(b.shard_size);
    e.work->wait();
    e.work.reset();
    tracerun::Scope scope("dp_bytegrad_gather", {{vocab::arg::kBucket, int64_t(i)},
                                                 {vocab::arg::kBytes, int64_t(e.mine.nbytes())}});
    at::Tensor average = at::zeros({b.shard_size}, at::kFloat);
    float* acc = average.data_ptr<float>();
    const uint8_t* in = e.recv.data_ptr<uint8_t>();
    for (int r = 0; r < dp_->size; ++r) decompressAddChunk(in + r * chunk, b.shard_size, acc);
    average.div_(dp_->size);
    compressChunk(acc, b.shard_size, e.mine.data_ptr<uint8_t>());
    std::vector<std::vector<at::Tensor>> gathered(1);
    for (int r = 0; r < dp_->size; ++r) gathered[0].push_back(e.send.narrow(0, r * chunk, chunk));
    std::vector<at::Tensor> inputs{e.mine};
    dp_->pg->allgather(gathered, inputs)->wait();
    at::Tensor full = at::empty({b.padded}, at::kFloat);
    for (int r = 0; r < dp_->size; ++r) {
      decompressChunk(gathered[0][r].data_ptr<uint8_t>(), b.shard_size,
                      full.data_ptr<float>() + r * b.shard_size);
    }
    b.flat.copy_(full);
  }

  std::vector<Exchange> exchanges_;  // per bucket
  size_t next_launch_ = 0;
  std::unique_ptr<AccumulateHooks> hooks_;  // last: removed before the buckets go
};

}  // namespace

std::unique_ptr<DataParallelStrategy> makeByteGrad(ParamSet& params, GroupPtr dp,
                                                   int64_t bucket_bytes) {
  return std::make_unique<ByteGrad>(params, std::move(dp), bucket_bytes);
}

}  // namespace gpttrain
