// Bucketed, hook-driven gradient all-reduce (see grad_buckets.h).
#include "grad_buckets.h"

#include <torch/csrc/autograd/utils/lambda_post_hook.h>

namespace gpttrain {

GradBuckets::GradBuckets(ParamSet& params, GroupPtr dp, int64_t bucket_bytes)
    : params_(params), dp_(std::move(dp)) {
  auto& entries = params_.entries();
  bucket_of_.assign(entries.size(), 0);
  // Group parameters, last registered first, into buckets of about bucket_bytes.
  std::vector<std::vector<size_t>> groups(1);
  int64_t bytes = 0;
  for (size_t i = entries.size(); i-- > 0;) {
    const int64_t n = entries[i].tensor.numel() * entries[i].tensor.element_size();
    if (!groups.back().empty() && bytes + n > bucket_bytes) {
      groups.emplace_back();
      bytes = 0;
    }
    groups.back().push_back(i);
    bytes += n;
  }
  for (auto& group : groups) {
    int64_t numel = 0;
    for (size_t i : group) numel += entries[i].tensor.numel();
    Bucket bucket;
    bucket.flat = at::zeros({numel}, entries[group.front()].tensor.options().requires_grad(false));
    int64_t offset = 0;
    for (size_t i : group) {
      at::Tensor& p = entries[i].tensor;
      p.mutable_grad() = bucket.flat.narrow(0, offset, p.numel()).view(p.sizes());
      offset += p.numel();
      bucket_of_[i] = buckets_.size();
    }
    bucket.params = group;
    buckets_.push_back(std::move(bucket));
  }
  if (dp_->size == 1) return;
  for (size_t i = 0; i < entries.size(); ++i) {
    auto acc = torch::autograd::impl::grad_accumulator(entries[i].tensor);
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
  for (size_t i = 0; i < accumulators_.size(); ++i) accumulators_[i]->del_post_hook(hook_keys_[i]);
}

void GradBuckets::zero() {
  for (auto& b : buckets_) {
    TORCH_CHECK(!b.work, "GradBuckets::zero while an all-reduce is in flight");
    b.flat.zero_();
    b.pending = b.params.size();
  }
  next_launch_ = 0;
}

void GradBuckets::setLastMicrobatch(bool last) {
  last_microbatch_ = last;
}

void GradBuckets::markReady(size_t param) {
  if (!last_microbatch_) return;
  Bucket& b = buckets_[bucket_of_[param]];
  if (b.pending > 0) --b.pending;
  launchReady();
}

void GradBuckets::launchReady() {
  // Strictly in bucket order, so every DP rank issues the same sequence of collectives.
  while (next_launch_ < buckets_.size() && buckets_[next_launch_].pending == 0) {
    tracerun::Scope scope("dp_bucket_allreduce",
                          {{"bucket", static_cast<int64_t>(next_launch_)},
                           {"bytes", static_cast<int64_t>(buckets_[next_launch_].flat.nbytes())}});
    Bucket& b = buckets_[next_launch_++];
    b.flat.div_(dp_->size);
    b.work = allReduceAsync(*dp_, b.flat);
    ++(in_finish_ ? launched_after_backward_ : launched_in_backward_);
  }
}

void GradBuckets::finish() {
  if (dp_->size > 1) {
    for (auto& b : buckets_) b.pending = 0;  // parameters that got no gradient this step
    in_finish_ = true;
    launchReady();
    in_finish_ = false;
  }
  for (auto& b : buckets_) {
    if (b.work) b.work->wait();
    b.work.reset();
  }
}

}  // namespace gpttrain
