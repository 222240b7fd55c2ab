// The autograd functions behind mappings.h: one small Function per mapping, each forward's dual
// as its backward. The group rides along in saved_data as a capsule.
#include "parallel/mappings.h"

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

// gatherFromSeq followed by at::linear would keep the gathered [S, B, in] input for the weight
// gradient; this keeps the [S/tp, B, in] shard and gathers it again in backward (one more
// all-gather per GEMM and step, sbh(1 - 1/tp) fewer elements held per GEMM). The collectives are
// blocking here, so the backward all-gather does not overlap the input-gradient GEMM. Under
// autocast the GEMMs run in the incoming gradient's dtype and each gradient takes the dtype of
// what it is the gradient of, as autograd's casts would.
struct LinearGatherFromSeq : torch::autograd::Function<LinearGatherFromSeq> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight,
                            const at::Tensor& bias, GroupPtr g) {
    saveGroup(ctx, g);
    ctx->save_for_backward({x, weight});
    ctx->saved_data["bias_dtype"] =
        bias.defined() ? c10::IValue(bias.scalar_type()) : c10::IValue();
    return at::linear(allGather(*g, x, 0), weight, bias);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    Group& group = savedGroup(ctx);
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor& x = saved[0];
    const at::Tensor& weight = saved[1];
    const at::Tensor& dy = grads[0];
    const auto compute = dy.scalar_type();
    at::Tensor dx = reduceScatter(group, at::matmul(dy, weight.to(compute)).to(x.scalar_type()), 0);
    at::Tensor dy2 = dy.reshape({-1, dy.size(-1)});
    at::Tensor gathered = allGather(group, x, 0).to(compute);
    at::Tensor dw = dy2.t().mm(gathered.reshape({-1, gathered.size(-1)})).to(weight.scalar_type());
    const c10::IValue& bias_dtype = ctx->saved_data["bias_dtype"];
    at::Tensor db = bias_dtype.isNone() ? at::Tensor() : dy2.sum(0).to(bias_dtype.toScalarType());
    return {dx, dw, db, at::Tensor()};
  }
};

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
at::Tensor linearGatherFromSeq(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, const GroupPtr& g) {
  if (g->size == 1) return at::linear(x, weight, bias);
  return LinearGatherFromSeq::apply(x, weight, bias, g);
}

}  // namespace gpttrain
