// The autograd functions behind mappings.h: one small Function per mapping, each forward's dual
// as its backward. The group rides along in saved_data as a capsule.
#include "mappings.h"

namespace gpttrain {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

void saveGroup(AutogradContext* ctx, const GroupPtr& g) {
  ctx->saved_data["group"] = c10::IValue::make_capsule(g);
}
Group& savedGroup(AutogradContext* ctx) {
  return *c10::static_intrusive_pointer_cast<Group>(ctx->saved_data["group"].toCapsule());
}

at::Tensor sumAll(Group& g, const at::Tensor& x) {
  at::Tensor out = x.contiguous().clone();
  allReduce(g, out);
  return out;
}
at::Tensor slice(Group& g, const at::Tensor& x, int64_t dim) {
  TORCH_CHECK(x.size(dim) % g.size == 0, "cannot split dimension ", dim, " of size ", x.size(dim),
              " over ", g.size, " ranks");
  return x.chunk(g.size, dim)[g.rank].contiguous();
}

// Each Function: forward(x, group) and backward returning {grad_x, undefined for the group}.
#define GPTTRAIN_MAPPING(Name, forward_expr, backward_expr)                            \
  struct Name : torch::autograd::Function<Name> {                                      \
    static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, GroupPtr g) { \
      saveGroup(ctx, g);                                                               \
      Group& group = *g;                                                               \
      (void)group;                                                                     \
      return forward_expr;                                                             \
    }                                                                                  \
    static variable_list backward(AutogradContext* ctx, variable_list grads) {         \
      Group& group = savedGroup(ctx);                                                  \
      (void)group;                                                                     \
      const at::Tensor& dy = grads[0];                                                 \
      return {backward_expr, at::Tensor()};                                            \
    }                                                                                  \
  }

GPTTRAIN_MAPPING(CopyToTp, x, sumAll(group, dy));
GPTTRAIN_MAPPING(ReduceFromTp, sumAll(group, x), dy);
GPTTRAIN_MAPPING(ScatterToTp, slice(group, x, x.dim() - 1), allGather(group, dy, dy.dim() - 1));
GPTTRAIN_MAPPING(GatherFromTp, allGather(group, x, x.dim() - 1), slice(group, dy, dy.dim() - 1));
GPTTRAIN_MAPPING(ScatterToSeq, slice(group, x, 0), allGather(group, dy, 0));
GPTTRAIN_MAPPING(GatherFromSeq, allGather(group, x, 0), reduceScatter(group, dy, 0));
GPTTRAIN_MAPPING(ReduceScatterToSeq, reduceScatter(group, x, 0), allGather(group, dy, 0));

#undef GPTTRAIN_MAPPING

template <typename F>
at::Tensor applyMapping(const at::Tensor& x, const GroupPtr& g) {
  if (g->size == 1) return x;
  return F::apply(x, g);
}

}  // namespace

at::Tensor copyToTp(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<CopyToTp>(x, g);
}
at::Tensor reduceFromTp(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<ReduceFromTp>(x, g);
}
at::Tensor scatterToTp(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<ScatterToTp>(x, g);
}
at::Tensor gatherFromTp(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<GatherFromTp>(x, g);
}
at::Tensor scatterToSeq(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<ScatterToSeq>(x, g);
}
at::Tensor gatherFromSeq(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<GatherFromSeq>(x, g);
}
at::Tensor reduceScatterToSeq(const at::Tensor& x, const GroupPtr& g) {
  return applyMapping<ReduceScatterToSeq>(x, g);
}

}  // namespace gpttrain
