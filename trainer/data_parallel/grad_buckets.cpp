// The bucket layout, buffers, hooks and reduction launch every DP strategy shares (see
// grad_buckets.h).
#include "data_parallel/grad_buckets.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

// "layers.<i>...." -> i; anything else -> -1 (the root).
int unitOf(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return -1;
  return std::stoi(name.substr(7));
}

// Runs before a parameter's AccumulateGrad.
class BeforeAccumulate : public torch::autograd::FunctionPreHook {
 public:
  explicit BeforeAccumulate(std::function<void()> fn) : fn_(std::move(fn)) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& grads) override {
    fn_();
    return grads;
  }

 private:
  std::function<void()> fn_;
};

}  // namespace

// --- layout

GradBuckets::GradBuckets(ParamSet& params, const BucketLayout& layout) : params_(params) {
  auto& entries = params_.entries();
  bucket_of_.assign(entries.size(), 0);
  member_of_.assign(entries.size(), 0);
  // Group parameters, last registered first, into buckets of about bucket_bytes.
  std::vector<std::vector<size_t>> groups(1);
  int64_t bytes = 0;
  for (size_t i = entries.size(); i-- > 0;) {
    const int64_t n = entries[i].tensor.numel() * entries[i].tensor.element_size();
    const bool alone = entries[i].name == kTiedEmbeddingName;
    const bool new_unit = layout.per_unit && !groups.back().empty() &&
                          unitOf(entries[groups.back().back()].name) != unitOf(entries[i].name);
    const bool split = unitOf(entries[i].name) < 0 || !layout.per_unit;  // units stay whole
    if (!groups.back().empty() &&
        ((split && bytes + n > layout.bucket_bytes) || alone || new_unit)) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += alone ? layout.bucket_bytes + 1 : n;  // nothing joins the embedding's bucket
  }
  const int64_t shards = layout.shards;
  for (auto& group : groups) {
    GradBucket bucket;
    for (size_t i : group) {
      bucket.members.push_back(BucketMember{i, bucket.numel, entries[i].tensor.numel(),
                                            entries[i].tensor.sizes().vec()});
      bucket.numel += entries[i].tensor.numel();
      bucket_of_[i] = buckets_.size();
      member_of_[i] = bucket.members.size() - 1;
    }
    bucket.padded = (bucket.numel + shards - 1) / shards * shards;
    bucket.shard_size = bucket.padded / shards;
    bucket.shard_begin = bucket.shard_size * layout.shard_rank;
    if (layout.per_unit) bucket.unit = unitOf(entries[group.front()].name);
    buckets_.push_back(std::move(bucket));
  }
}

at::TensorOptions GradBuckets::options(const GradBucket& b) const {
  return params_.entries()[b.members.front().param].tensor.options().requires_grad(false);
}

int64_t GradBuckets::numel() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b.numel;
  return n;
}

// --- buffers

void GradBuckets::flattenParams(GradBucket& b) {
  // The constructors run under a gradient memory tag; this buffer is counted as parameters.
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
  at::NoGradGuard no_grad;
  const at::TensorOptions options = this->options(b);
  b.params = at::zeros({b.padded}, options);
  for (const BucketMember& m : b.members) {
    at::Tensor& p = params_.entries()[m.param].tensor;
    at::Tensor view = b.params.narrow(0, m.offset, m.numel).view(p.sizes());
    view.copy_(p);
    p.set_data(view);
  }
}

void GradBuckets::allocateGrads(GradBucket& b, const at::TensorOptions& options) {
  b.flat = at::zeros({b.padded}, options);
  attachGrads(b);
}

void GradBuckets::attachGrads(GradBucket& b) {
  for (const BucketMember& m : b.members) {
    at::Tensor& p = params_.entries()[m.param].tensor;
    p.mutable_grad() = b.flat.narrow(0, m.offset, m.numel).view(m.shape);
  }
}

void GradBuckets::detachGrads(const GradBucket& b) {
  for (const BucketMember& m : b.members) params_.entries()[m.param].tensor.mutable_grad().reset();
}

int64_t GradBuckets::gradientBytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) {
    for (const at::Tensor* t : {&b.flat, &b.grad_shard}) {
      if (t->defined()) bytes += t->nbytes();
    }
  }
  return bytes;
}

int64_t GradBuckets::flatParameterBytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) {
    if (b.params.defined()) bytes += b.params.nbytes();
  }
  return bytes;
}

// --- reductions

void GradBuckets::launchReduction(Group& dp, size_t index, bool scatter, bool after_backward) {
  GradBucket& b = buckets_[index];
  // The scope names the implementation that runs (Gloo has no reduce-scatter).
  const char* name = !scatter                     ? vocab::scope::kDpBucketAllreduce
                     : dp.native_base_collectives ? vocab::scope::kDpBucketReduceScatterBase
                                                  : vocab::scope::kDpBucketReduceScatterAllReduce;
  tracerun::Scope scope(name, {{vocab::arg::kBucket, static_cast<int64_t>(index)},
                               {vocab::arg::kBytes, static_cast<int64_t>(b.flat.nbytes())}});
  b.flat.div_(dp.size);
  if (scatter && dp.native_base_collectives) {
    dp.count(CollectiveImpl::kReduceScatterBase);
    b.work = dp.pg->_reduce_scatter_base(b.grad_shard, b.flat);
  } else {
    // Gloo has no reduce-scatter: all-reduce, and the caller keeps this rank's slice.
    if (scatter) dp.count(CollectiveImpl::kReduceScatterAllReduce);
    b.work = allReduceAsync(dp, b.flat);
  }
  countLaunch(after_backward);
}

void GradBuckets::beginInOrderStep() {
  for (GradBucket& b : buckets_) {
    TORCH_CHECK(!b.work, "beginStep while a reduction is in flight");
    b.flat.zero_();
    b.pending = b.members.size();
  }
  next_launch_ = 0;
}

void GradBuckets::gradientInOrder(Group& dp, size_t param) {
  GradBucket& b = buckets_[bucket_of_[param]];
  if (b.pending > 0) --b.pending;
  launchReadyInOrder(dp, /*after_backward=*/false);
}

void GradBuckets::finishInOrder(Group& dp) {
  if (dp.size > 1) {  // parameters that got no gradient this step
    for (auto& b : buckets_) b.pending = 0;
    launchReadyInOrder(dp, /*after_backward=*/true);
  }
  for (auto& b : buckets_) {
    if (b.work) b.work->wait();
    b.work.reset();
  }
}

void GradBuckets::launchReadyInOrder(Group& dp, bool after_backward) {
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    launchReduction(dp, next_launch_++, /*scatter=*/false, after_backward);
  }
}

at::Tensor gatherFullGrad(Group& dp, const GradBucket& b, const at::Tensor& shard, size_t param) {
  at::Tensor flat = allGather(dp, shard, 0);
  for (const BucketMember& m : b.members) {
    if (m.param == param) return flat.narrow(0, m.offset, m.numel).view(m.shape).clone();
  }
  return {};
}

void allGatherParams(Group& dp, GradBucket& b, size_t index, const at::Tensor& shard) {
  if (dp.size == 1) return;
  tracerun::Scope scope(vocab::scope::kZeroParamAllgather,
                        {{vocab::arg::kBucket, static_cast<int64_t>(index)},
                         {vocab::arg::kBytes, static_cast<int64_t>(shard.nbytes())}});
  b.params.copy_(allGather(dp, shard, 0));
}

// --- hooks

AccumulateHooks::AccumulateHooks(ParamSet& params, std::function<void(size_t)> before,
                                 std::function<void(size_t)> after) {
  auto& entries = params.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(entries[i].tensor);
    if (before) {
      auto hook = std::make_unique<BeforeAccumulate>([before, i] { before(i); });
      pre_hooks_.push_back(hook.get());
      acc->add_pre_hook(std::move(hook));
    }
    post_keys_.push_back(
        acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [after, i](const torch::autograd::variable_list& outputs,
                       const torch::autograd::variable_list&) {
              after(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(acc));
  }
}

AccumulateHooks::~AccumulateHooks() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(post_keys_[i]);
    if (i < pre_hooks_.size()) {  // the accumulator may outlive this object: drop what refers to it
      auto& hooks = accumulators_[i]->pre_hooks();
      hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                                 [&](const auto& h) { return h.get() == pre_hooks_[i]; }),
                  hooks.end());
    }
  }
}

}  // namespace gpttrain
