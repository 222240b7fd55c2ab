// Bucketed, hook-driven gradient reduction, with ZeRO's shard layout (see grad_buckets.h).
#include "grad_buckets.h"

#include <torch/csrc/autograd/engine.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/utils/lambda_post_hook.h>

#include <algorithm>
#include <functional>

namespace gpttrain {
namespace {

constexpr const char* kTiedEmbedding = "embedding.word.weight";

// "layers.<i>...." -> i; anything else -> -1 (the root).
int unitOf(const std::string& name) {
  if (name.rfind("layers.", 0) != 0) return -1;
  return std::stoi(name.substr(7));
}

// Runs before a parameter's AccumulateGrad (stage 2): gives the gradient its place in the bucket's
// buffer, allocated only now.
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

GradBuckets::GradBuckets(ParamSet& params, GroupPtr dp, int64_t bucket_bytes, int zero_stage)
    : params_(params),
      dp_(std::move(dp)),
      zero_stage_(zero_stage),
      eager_(zero_stage == 2 && dp_->size > 1) {
  auto& entries = params_.entries();
  bucket_of_.assign(entries.size(), 0);
  member_of_.assign(entries.size(), 0);
  // Group parameters, last registered first, into buckets of about bucket_bytes.
  std::vector<std::vector<size_t>> groups(1);
  int64_t bytes = 0;
  for (size_t i = entries.size(); i-- > 0;) {
    const int64_t n = entries[i].tensor.numel() * entries[i].tensor.element_size();
    const bool alone = entries[i].name == kTiedEmbedding;
    const bool new_unit = zero_stage_ >= 3 && !groups.back().empty() &&
                          unitOf(entries[groups.back().back()].name) != unitOf(entries[i].name);
    const bool split = unitOf(entries[i].name) < 0 || zero_stage_ < 3;  // units stay whole
    if (!groups.back().empty() && ((split && bytes + n > bucket_bytes) || alone || new_unit)) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += alone ? bucket_bytes + 1 : n;  // nothing joins the embedding's bucket
  }
  const int64_t shards = zero_stage_ >= 1 ? dp_->size : 1;
  for (auto& group : groups) {
    Bucket bucket;
    for (size_t i : group) {
      bucket.members.push_back(
          Member{i, bucket.numel, entries[i].tensor.numel(), entries[i].tensor.sizes().vec()});
      bucket.numel += entries[i].tensor.numel();
      bucket_of_[i] = buckets_.size();
      member_of_[i] = bucket.members.size() - 1;
    }
    bucket.padded = (bucket.numel + shards - 1) / shards * shards;
    bucket.shard_size = bucket.padded / shards;
    bucket.shard_begin = zero_stage_ >= 1 ? bucket.shard_size * dp_->rank : 0;
    const auto options = entries[group.front()].tensor.options().requires_grad(false);
    if (zero_stage_ >= 1) {
      // Parameters become views of one flat buffer with the gradients' layout. The constructor
      // runs under a gradient memory tag; the buffer is counted as parameters.
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
      at::NoGradGuard no_grad;
      bucket.params = at::zeros({bucket.padded}, options);
      for (const Member& m : bucket.members) {
        at::Tensor& p = entries[m.param].tensor;
        at::Tensor view = bucket.params.narrow(0, m.offset, m.numel).view(p.sizes());
        view.copy_(p);
        p.set_data(view);
      }
    }
    if (zero_stage_ >= 2) bucket.grad_shard = at::zeros({bucket.shard_size}, options);
    bucket.arrived.assign(bucket.members.size(), false);
    if (!eager_) {  // stage 2 allocates it when the bucket's first gradient arrives
      bucket.flat = at::zeros({bucket.padded}, options);
      attachGrads(bucket);
    }
    if (zero_stage_ >= 3) {
      bucket.unit = unitOf(entries[group.front()].name);
      {
        tracerun::MemoryTag tag(tracerun::MemoryCategory::kParameter);
        bucket.param_shard = bucket.params.narrow(0, bucket.shard_begin, bucket.shard_size).clone();
      }
      if (bucket.unit >= 0) unit_bucket_[bucket.unit] = buckets_.size();
      releaseBucket(bucket);
      bucket.flat = at::Tensor();
      for (const Member& m : bucket.members) entries[m.param].tensor.mutable_grad().reset();
    }
    buckets_.push_back(std::move(bucket));
  }
  if (dp_->size == 1 || zero_stage_ >= 3) return;  // stage 3 reduces in reduceGrads / finish
  for (size_t i = 0; i < entries.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(entries[i].tensor);
    if (eager_) {
      auto hook =
          std::make_unique<BeforeAccumulate>([this, i] { ensureFlat(buckets_[bucket_of_[i]]); });
      pre_hooks_.push_back(hook.get());
      acc->add_pre_hook(std::move(hook));
    }
    hook_keys_.push_back(
        acc->add_post_hook(std::make_unique<torch::autograd::utils::LambdaPostHook>(
            [this, i](const torch::autograd::variable_list& outputs,
                      const torch::autograd::variable_list&) {
              markReady(i);
              return outputs;
            })));
    accumulators_.push_back(std::move(acc));
  }
}

GradBuckets::~GradBuckets() {
  for (size_t i = 0; i < accumulators_.size(); ++i) {
    accumulators_[i]->del_post_hook(hook_keys_[i]);
    if (i < pre_hooks_.size()) {  // the accumulator may outlive this object: drop what refers to it
      auto& hooks = accumulators_[i]->pre_hooks();
      hooks.erase(std::remove_if(hooks.begin(), hooks.end(),
                                 [&](const auto& h) { return h.get() == pre_hooks_[i]; }),
                  hooks.end());
    }
  }
}

void GradBuckets::attachGrads(Bucket& b) {
  for (const Member& m : b.members) {
    at::Tensor& p = params_.entries()[m.param].tensor;
    p.mutable_grad() = b.flat.narrow(0, m.offset, m.numel).view(m.shape);
  }
}

void GradBuckets::zero() {
  for (auto& b : buckets_) {
    TORCH_CHECK(!b.work, "GradBuckets::zero while a reduction is in flight");
    if (b.grad_shard.defined()) b.grad_shard.zero_();
    if (b.unit >= 0) continue;  // stage 3 units: full gradients exist only in their backward
    if (eager_) {  // the full buffer is allocated when the bucket's first gradient arrives
      b.pending = b.members.size();
      b.arrived.assign(b.members.size(), false);
      b.arrived_count = 0;
      continue;
    }
    if (b.flat.defined()) {
      b.flat.zero_();
    } else {
      b.flat = at::zeros({b.padded}, b.grad_shard.options());
      attachGrads(b);
    }
    b.pending = b.members.size();
  }
  next_launch_ = 0;
}

void GradBuckets::setLastMicrobatch(bool last) {
  last_microbatch_ = last;
}

void GradBuckets::markReady(size_t param) {
  if (eager_) return arrived(param);
  if (!last_microbatch_) return;
  Bucket& b = buckets_[bucket_of_[param]];
  if (b.pending > 0) --b.pending;
  launchReady();
}

void GradBuckets::launchReady() {
  // Strictly in bucket order, so every DP rank issues the same sequence of collectives.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    if (buckets_[next_launch_].unit >= 0) {  // stage 3 units were reduced in reduceGrads
      ++next_launch_;
      continue;
    }
    const bool scatter = zero_stage_ >= 2;
    // The scope names the implementation that runs (Gloo has no reduce-scatter).
    const char* name = !scatter ? "dp_bucket_allreduce"
                       : dp_->native_base_collectives
                           ? "dp_bucket_reduce_scatter[reduce_scatter_base]"
                           : "dp_bucket_reduce_scatter[all_reduce+narrow]";
    tracerun::Scope scope(name,
                          {{"bucket", static_cast<int64_t>(next_launch_)},
                           {"bytes", static_cast<int64_t>(buckets_[next_launch_].flat.nbytes())}});
    Bucket& b = buckets_[next_launch_++];
    b.flat.div_(dp_->size);
    if (scatter && dp_->native_base_collectives) {
      dp_->count(CollectiveImpl::kReduceScatterBase);
      b.work = dp_->pg->_reduce_scatter_base(b.grad_shard, b.flat);
    } else {
      // Gloo has no reduce-scatter: all-reduce, and keep this rank's slice in finish().
      if (scatter) dp_->count(CollectiveImpl::kReduceScatterAllReduce);
      b.work = allReduceAsync(*dp_, b.flat);
    }
    ++(in_finish_ ? launched_after_backward_ : launched_in_backward_);
  }
}

void GradBuckets::finish() {
  completeUnitReduce();
  if (eager_) {
    completeShardReduce();
    // Gradients no reduction took yet (a member that got none this microbatch): in bucket order,
    // the same on every DP rank.
    in_finish_ = true;
    for (size_t i = 0; i < buckets_.size(); ++i) {
      if (buckets_[i].flat.defined()) launchShardReduce(i);
    }
    completeShardReduce();
    in_finish_ = false;
    return;
  }
  if (dp_->size > 1) {
    for (auto& b : buckets_) b.pending = 0;  // parameters that got no gradient this step
    in_finish_ = true;
    launchReady();
    in_finish_ = false;
  }
  for (auto& b : buckets_) {
    if (b.work) b.work->wait();
    b.work.reset();
    if (zero_stage_ < 2 || !b.flat.defined()) continue;
    if (!dp_->native_base_collectives) {
      b.grad_shard.copy_(b.flat.narrow(0, b.shard_begin, b.shard_size));
    }
    // Free the full buffer: only the shard is kept until the optimizer step.
    b.flat = at::Tensor();
    for (const Member& m : b.members) params_.entries()[m.param].tensor.mutable_grad().reset();
  }
}

at::Tensor GradBuckets::gradShard(size_t bucket) {
  Bucket& b = buckets_[bucket];
  if (zero_stage_ >= 2) return b.grad_shard;
  return b.flat.narrow(0, b.shard_begin, b.shard_size);
}

at::Tensor GradBuckets::fullGrad(size_t param) {
  const at::Tensor& p = params_.entries()[param].tensor;
  if (zero_stage_ < 1) return p.grad();
  Bucket& b = buckets_[bucket_of_[param]];
  at::Tensor flat = allGather(*dp_, gradShard(bucket_of_[param]), 0);
  for (const Member& m : b.members) {
    if (m.param == param) return flat.narrow(0, m.offset, m.numel).view(m.shape).clone();
  }
  return {};
}

int64_t GradBuckets::gradientBytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) {
    for (const at::Tensor* t : {&b.flat, &b.grad_shard, &b.reducing, &b.reduced}) {
      if (t->defined()) bytes += t->nbytes();
    }
  }
  return bytes;
}

int64_t GradBuckets::numel() const {
  int64_t n = 0;
  for (const auto& b : buckets_) n += b.numel;
  return n;
}

int64_t GradBuckets::parameterBytes() const {
  int64_t bytes = 0;
  for (const auto& b : buckets_) {
    if (b.params.defined()) bytes += b.params.nbytes();
    if (b.param_shard.defined()) bytes += b.param_shard.nbytes();
  }
  if (zero_stage_ == 0) bytes = numel() * int64_t(sizeof(float));
  return bytes;
}

// --- stage 2: each bucket reduce-scattered as soon as its gradients are complete

void GradBuckets::ensureFlat(Bucket& b) {
  if (b.flat.defined()) return;
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
  b.flat = at::zeros({b.padded}, b.grad_shard.options());
  attachGrads(b);
}

// A bucket is reduced when every member's gradient has been accumulated since its last reduction
// (with interleaved chunks, members of two chunks: the buffer may hold several microbatches of
// one chunk's), or when the last microbatch's gradient of every member is in. The sequence of
// launches follows the order autograd runs the accumulators, the same on every DP rank.
void GradBuckets::arrived(size_t param) {
  const size_t index = bucket_of_[param];
  Bucket& b = buckets_[index];
  const size_t m = member_of_[param];
  if (!b.arrived[m]) {
    b.arrived[m] = true;
    ++b.arrived_count;
  }
  if (last_microbatch_ && b.pending > 0) --b.pending;
  if (b.arrived_count == b.members.size() || (last_microbatch_ && b.pending == 0)) {
    launchShardReduce(index);
  }
}

void GradBuckets::launchShardReduce(size_t index) {
  Bucket& b = buckets_[index];
  if (!b.flat.defined()) return;
  completeShardReduce();  // one bucket's reduction in flight at a time
  const bool native = dp_->native_base_collectives;
  tracerun::Scope scope(
      native ? "dp_bucket_reduce_scatter[reduce_scatter_base]"
             : "dp_bucket_reduce_scatter[all_reduce+narrow]",
      {{"bucket", static_cast<int64_t>(index)}, {"bytes", static_cast<int64_t>(b.flat.nbytes())}});
  // The parameters' gradients let go of the buffer: the next microbatch accumulates into a new one.
  for (const Member& m : b.members) params_.entries()[m.param].tensor.mutable_grad().reset();
  b.reducing = std::move(b.flat);
  b.flat = at::Tensor();
  b.arrived.assign(b.members.size(), false);
  b.arrived_count = 0;
  b.reducing.div_(dp_->size);
  if (native) {
    {
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kGradient);
      b.reduced = at::empty({b.shard_size}, b.grad_shard.options());
    }
    dp_->count(CollectiveImpl::kReduceScatterBase);
    b.work = dp_->pg->_reduce_scatter_base(b.reduced, b.reducing);
  } else {
    // Gloo has no reduce-scatter: all-reduce, and keep this rank's slice.
    dp_->count(CollectiveImpl::kReduceScatterAllReduce);
    b.work = allReduceAsync(*dp_, b.reducing);
  }
  reducing_ = index;
  ++(in_finish_ ? launched_after_backward_ : launched_in_backward_);
  // Free the full buffer at the end of this backward at the latest (not after the next forward).
  if (!in_finish_) {
    torch::autograd::Engine::get_default_engine().queue_callback([this] { completeShardReduce(); });
  }
}

void GradBuckets::completeShardReduce() {
  if (!reducing_) return;
  Bucket& b = buckets_[*reducing_];
  if (b.work) {
    tracerun::Scope scope("dp_bucket_reduce_wait", {{"bucket", static_cast<int64_t>(*reducing_)}});
    b.work->wait();
    b.work.reset();
  }
  reducing_.reset();
  at::NoGradGuard no_grad;
  b.grad_shard.add_(b.reduced.defined() ? b.reduced
                                        : b.reducing.narrow(0, b.shard_begin, b.shard_size));
  b.reducing = at::Tensor();
  b.reduced = at::Tensor();
}

// --- stage 3: parameter units

void GradBuckets::startGather(Bucket& b) {
  if (b.params.defined() || b.gather_work || dp_->size == 1) return;
  tracerun::Scope scope(
      "zero3_gather_start[all_gather_list+cat]",
      {{"unit", b.unit}, {"bytes", static_cast<int64_t>(b.param_shard.nbytes())}});
  b.gather_out.assign(1, {});
  for (int i = 0; i < dp_->size; ++i) b.gather_out[0].push_back(at::empty_like(b.param_shard));
  std::vector<at::Tensor> inputs{b.param_shard};
  dp_->count(CollectiveImpl::kAllGatherList);
  b.gather_work = dp_->pg->allgather(b.gather_out, inputs);
}

void GradBuckets::finishGather(Bucket& b) {
  if (b.params.defined()) return;
  if (dp_->size == 1) {
    b.params = b.param_shard;
  } else {
    startGather(b);
    tracerun::Scope scope("zero3_gather_wait", {{"unit", b.unit}});
    b.gather_work->wait();
    b.gather_work.reset();
    b.params = at::cat(b.gather_out[0]);
    b.gather_out.clear();
  }
  at::NoGradGuard no_grad;
  for (const Member& m : b.members) {
    params_.entries()[m.param].tensor.set_data(b.params.narrow(0, m.offset, m.numel).view(m.shape));
  }
}

void GradBuckets::releaseBucket(Bucket& b) {
  at::NoGradGuard no_grad;
  for (const Member& m : b.members) {
    at::Tensor& p = params_.entries()[m.param].tensor;
    p.set_data(at::empty({0}, p.options().requires_grad(false)));
  }
  b.params = at::Tensor();
}

void GradBuckets::gather(int layer, bool backward) {
  auto it = unit_bucket_.find(layer);
  if (it == unit_bucket_.end()) return;
  Bucket& b = buckets_[it->second];
  finishGather(b);
  if (backward) {  // the re-run's backward accumulates into full gradients
    if (pending_unit_ == it->second) completeUnitReduce();  // its buffer is about to be reused
    b.flat = at::zeros({b.padded}, b.param_shard.options());
    attachGrads(b);
  }
  // Prefetch the unit this rank runs next: forward goes up the layers, backward down.
  auto next = unit_bucket_.find(backward ? layer - 1 : layer + 1);
  if (next != unit_bucket_.end()) startGather(buckets_[next->second]);
}

void GradBuckets::release(int layer) {
  auto it = unit_bucket_.find(layer);
  if (it != unit_bucket_.end()) releaseBucket(buckets_[it->second]);
}

void GradBuckets::reduceGrads(int layer) {
  auto it = unit_bucket_.find(layer);
  if (it == unit_bucket_.end()) return;
  completeUnitReduce();  // at most one layer's reduction in flight
  Bucket& b = buckets_[it->second];
  tracerun::Scope scope("zero3_reduce_scatter[all_reduce+narrow]",
                        {{"unit", b.unit}, {"bytes", static_cast<int64_t>(b.flat.nbytes())}});
  b.flat.div_(dp_->size);
  for (const Member& m : b.members) params_.entries()[m.param].tensor.mutable_grad().reset();
  if (dp_->size > 1) {
    // Gloo: all-reduce, keep the slice. Completed while the layer below runs its backward.
    dp_->count(CollectiveImpl::kReduceScatterAllReduce);
    b.work = allReduceAsync(*dp_, b.flat);
  }
  pending_unit_ = it->second;
}

void GradBuckets::completeUnitReduce() {
  if (!pending_unit_) return;
  Bucket& b = buckets_[*pending_unit_];
  pending_unit_.reset();
  if (b.work) {
    tracerun::Scope scope("zero3_reduce_wait", {{"unit", b.unit}});
    b.work->wait();
    b.work.reset();
  }
  b.grad_shard.add_(b.flat.narrow(0, b.shard_begin, b.shard_size));
  b.flat = at::Tensor();
}

void GradBuckets::gatherRoot() {
  for (auto& b : buckets_) {
    if (zero_stage_ >= 3 && b.unit < 0) finishGather(b);
  }
}

void GradBuckets::releaseRoot() {
  for (auto& b : buckets_) {
    if (zero_stage_ >= 3 && b.unit < 0) releaseBucket(b);
  }
}

}  // namespace gpttrain
