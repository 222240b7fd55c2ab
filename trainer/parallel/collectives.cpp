// Collectives with per-backend fallbacks (see collectives.h). Blocking except allReduceAsync.
#include "parallel/collectives.h"

namespace gpttrain {
namespace {

namespace vocab = tracerun::vocab;

// A bfloat16 tensor on a group whose backend has no bfloat16 (Gloo in libtorch 1.13 takes neither
// bfloat16 nor int16): sums travel as fp32, gathers as the tensor's bytes (uint8, exact).
bool lacksBf16(const Group& g, const at::Tensor& t) {
  return g.size > 1 && !g.native_bf16 && t.scalar_type() == at::kBFloat16;
}

// The fp32 copy a bfloat16 sum travels in: a temporary (the memory report counts it so).
at::Tensor wideTemporary(const at::Tensor& t) {
  tracerun::MemoryTag tag(tracerun::MemoryCategory::kTemporary);
  return t.to(at::kFloat);
}

// The pending sum of a bfloat16 tensor in its fp32 copy: wait() waits for the sum, rounds it back
// into the bfloat16 tensor once and frees the copy.
class WidenedWork final : public c10d::Work {
 public:
  WidenedWork(c10::intrusive_ptr<c10d::Work> inner, at::Tensor wide, at::Tensor target)
      : inner_(std::move(inner)), wide_(std::move(wide)), target_(std::move(target)) {}
  bool isCompleted() override { return !wide_.defined() || inner_->isCompleted(); }
  bool wait(std::chrono::milliseconds timeout) override {
    if (!wide_.defined()) return true;
    const bool ok = inner_->wait(timeout);
    at::NoGradGuard no_grad;
    target_.copy_(wide_);
    wide_ = at::Tensor();
    target_ = at::Tensor();
    return ok;
  }

 private:
  c10::intrusive_ptr<c10d::Work> inner_;
  at::Tensor wide_, target_;
};

c10::intrusive_ptr<c10d::Work> launchAllReduce(Group& g, at::Tensor& t, ReduceOp op) {
  if (g.size == 1) return {};
  TORCH_CHECK(t.is_contiguous(), "allReduce needs a contiguous tensor");
  std::vector<at::Tensor> tensors{t};
  c10d::AllreduceOptions options;
  options.reduceOp = op == ReduceOp::kMax ? c10d::ReduceOp::MAX : c10d::ReduceOp::SUM;
  g.count(CollectiveImpl::kAllReduce);
  return g.pg->allreduce(tensors, options);
}

}  // namespace

const char* collectiveImplName(CollectiveImpl impl) {
  switch (impl) {
    case CollectiveImpl::kAllReduce:
      return "all_reduce";
    case CollectiveImpl::kAllGatherBase:
      return "all_gather_base";
    case CollectiveImpl::kAllGatherList:
      return "all_gather_list+cat";
    case CollectiveImpl::kReduceScatterBase:
      return "reduce_scatter_base";
    case CollectiveImpl::kReduceScatterAllReduce:
      return "all_reduce+narrow";
    case CollectiveImpl::kCount:
      break;
  }
  return "?";
}

GroupPtr makeSoloGroup(const std::string& name, int global_rank) {
  auto g = c10::make_intrusive<Group>();
  g->name = name;
  g->global_ranks = {global_rank};
  return g;
}

at::Tensor wireView(const Group& g, const at::Tensor& t) {
  return lacksBf16(g, t) ? t.view(at::kByte) : t;
}

at::Tensor fromWire(const at::Tensor& wire, at::ScalarType dtype) {
  return wire.scalar_type() == dtype ? wire : wire.view(dtype);
}

void allReduce(Group& g, at::Tensor& t, ReduceOp op) {
  if (lacksBf16(g, t)) {
    at::Tensor wide = wideTemporary(t);
    allReduce(g, wide, op);
    t.copy_(wide);
    return;
  }
  if (auto work = launchAllReduce(g, t, op)) work->wait();
}

c10::intrusive_ptr<c10d::Work> allReduceAsync(Group& g, at::Tensor& t) {
  if (lacksBf16(g, t)) {
    TORCH_CHECK(t.is_contiguous(), "allReduceAsync needs a contiguous tensor");
    at::Tensor wide = wideTemporary(t);
    auto inner = launchAllReduce(g, wide, ReduceOp::kSum);
    return c10::make_intrusive<WidenedWork>(std::move(inner), std::move(wide), t);
  }
  return launchAllReduce(g, t, ReduceOp::kSum);
}

at::Tensor allGather(Group& g, const at::Tensor& t, int64_t dim) {
  if (g.size == 1) return t;
  if (lacksBf16(g, t)) {  // exact: the bytes travel; a trailing byte dimension keeps pairs
    return allGather(g, t.contiguous().view(at::kByte), dim).view(at::kBFloat16);
  }
  at::Tensor input = t.contiguous();
  if (g.native_base_collectives) {
    std::vector<int64_t> shape{g.size};
    shape.insert(shape.end(), input.sizes().begin(), input.sizes().end());
    at::Tensor stacked = at::empty(shape, input.options());
    g.count(CollectiveImpl::kAllGatherBase);
    tracerun::Scope scope(vocab::scope::kAllGatherBase,
                          {{vocab::arg::kBytes, static_cast<int64_t>(input.nbytes())}});
    g.pg->_allgather_base(stacked, input)->wait();
    return at::cat(stacked.unbind(0), dim);
  }
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < g.size; ++i) outputs[0].push_back(at::empty_like(input));
  std::vector<at::Tensor> inputs{input};
  g.count(CollectiveImpl::kAllGatherList);
  tracerun::Scope scope(vocab::scope::kAllGatherListCat,
                        {{vocab::arg::kBytes, static_cast<int64_t>(input.nbytes())}});
  g.pg->allgather(outputs, inputs)->wait();
  return at::cat(outputs[0], dim);
}

at::Tensor reduceScatter(Group& g, const at::Tensor& t, int64_t dim) {
  if (g.size == 1) return t;
  if (lacksBf16(g, t)) return reduceScatter(g, wideTemporary(t), dim).to(t.scalar_type());
  TORCH_CHECK(t.size(dim) % g.size == 0, "reduceScatter: dimension ", dim, " of size ", t.size(dim),
              " is not divisible by the group size ", g.size);
  if (g.native_base_collectives) {
    at::Tensor input = at::stack(t.chunk(g.size, dim), 0).contiguous();
    at::Tensor output = at::empty(input.sizes().slice(1), input.options());
    g.count(CollectiveImpl::kReduceScatterBase);
    tracerun::Scope scope(vocab::scope::kReduceScatterBase,
                          {{vocab::arg::kBytes, static_cast<int64_t>(input.nbytes())}});
    g.pg->_reduce_scatter_base(output, input)->wait();
    return output;
  }
  at::Tensor summed = t.contiguous().clone();
  std::vector<at::Tensor> tensors{summed};
  g.count(CollectiveImpl::kReduceScatterAllReduce);
  tracerun::Scope scope(vocab::scope::kReduceScatterAllReduce,
                        {{vocab::arg::kBytes, static_cast<int64_t>(summed.nbytes())}});
  g.pg->allreduce(tensors)->wait();
  return summed.chunk(g.size, dim)[g.rank].contiguous();
}

c10::intrusive_ptr<c10d::Work> sendAsync(Group& g, const at::Tensor& t, int peer, int tag) {
  TORCH_CHECK(g.size > 1, "sendAsync on a group of one rank");
  at::Tensor wire = t.scalar_type() == at::kFloat ? t.contiguous() : t.to(at::kFloat).contiguous();
  if (g.host_p2p && !wire.is_cpu()) wire = wire.to(at::kCPU);
  std::vector<at::Tensor> tensors{wire};
  return g.pg->send(tensors, peer, tag);
}

at::Tensor recv(Group& g, at::IntArrayRef shape, torch::Device device, int peer, int tag) {
  PostedRecv posted = postRecv(g, shape, device, peer, tag);
  posted.work->wait();
  return posted.take();
}

PostedRecv postRecv(Group& g, at::IntArrayRef shape, torch::Device device, int peer, int tag) {
  TORCH_CHECK(g.size > 1, "recv on a group of one rank");
  const torch::Device wire = g.host_p2p ? torch::Device(torch::kCPU) : device;
  std::vector<at::Tensor> tensors{at::empty(shape, at::TensorOptions(at::kFloat).device(wire))};
  auto work = g.pg->recv(tensors, peer, tag);
  return PostedRecv{tensors[0], std::move(work), device};
}

}  // namespace gpttrain
