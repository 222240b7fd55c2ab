// The AdamW update, the learning-rate schedule and the optimizer factory (see optimizer.h).
#include "optim/optimizer.h"

#include "data_parallel/dp_strategy.h"

#include <algorithm>
#include <cmath>

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace gpttrain {
namespace {

// The fused pass of adamwUpdate over n contiguous floats; the same operations, in the same order
// and float precision, as the ATen fallback below.
void adamwFused(float* p, const float* g, float* m, float* v, int64_t n, const AdamwStep& s) {
  const float decay = float(s.decay), beta1 = float(s.beta1), beta2 = float(s.beta2);
  const float one_minus_beta1 = float(1.0 - s.beta1), one_minus_beta2 = float(1.0 - s.beta2);
  const float sqrt_bias2 = float(std::sqrt(s.bias2)), eps = float(s.eps);
  const float step = float(-s.lr / s.bias1);
  int64_t i = 0;
#if defined(__SSE2__)
  const __m128 decay4 = _mm_set1_ps(decay), beta1_4 = _mm_set1_ps(beta1),
               beta2_4 = _mm_set1_ps(beta2), one_minus_beta1_4 = _mm_set1_ps(one_minus_beta1),
               one_minus_beta2_4 = _mm_set1_ps(one_minus_beta2),
               sqrt_bias2_4 = _mm_set1_ps(sqrt_bias2), eps4 = _mm_set1_ps(eps),
               step4 = _mm_set1_ps(step);
  for (; i + 4 <= n; i += 4) {
    const __m128 gi = _mm_loadu_ps(g + i);
    const __m128 mi =
        _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(m + i), beta1_4), _mm_mul_ps(gi, one_minus_beta1_4));
    const __m128 vi = _mm_add_ps(_mm_mul_ps(_mm_loadu_ps(v + i), beta2_4),
                                 _mm_mul_ps(_mm_mul_ps(one_minus_beta2_4, gi), gi));
    const __m128 denom = _mm_add_ps(_mm_div_ps(_mm_sqrt_ps(vi), sqrt_bias2_4), eps4);
    const __m128 pi = _mm_mul_ps(_mm_loadu_ps(p + i), decay4);
    _mm_storeu_ps(m + i, mi);
    _mm_storeu_ps(v + i, vi);
    _mm_storeu_ps(p + i, _mm_add_ps(pi, _mm_mul_ps(step4, _mm_div_ps(mi, denom))));
  }
#endif
  for (; i < n; ++i) {
    m[i] = m[i] * beta1 + g[i] * one_minus_beta1;
    v[i] = v[i] * beta2 + one_minus_beta2 * g[i] * g[i];
    const float denom = std::sqrt(v[i]) / sqrt_bias2 + eps;
    p[i] = p[i] * decay + step * (m[i] / denom);
  }
}

}  // namespace

void adamwUpdate(at::Tensor& p, const at::Tensor& g, at::Tensor& m, at::Tensor& v,
                 const AdamwStep& s) {
  const auto fused = [](const at::Tensor& t) {
    return t.is_cpu() && t.scalar_type() == at::kFloat && t.is_contiguous();
  };
  if (fused(p) && fused(g) && fused(m) && fused(v) && p.numel() == g.numel() &&
      p.numel() == m.numel() && p.numel() == v.numel()) {
    adamwFused(p.data_ptr<float>(), g.data_ptr<float>(), m.data_ptr<float>(), v.data_ptr<float>(),
               p.numel(), s);
    // Written through raw pointers: tell autograd, as an in-place ATen op would.
    for (at::Tensor* t : {&p, &m, &v}) torch::autograd::impl::bump_version(*t);
    return;
  }
  if (s.decay != 1.0) p.mul_(s.decay);
  m.mul_(s.beta1).add_(g, 1.0 - s.beta1);
  v.mul_(s.beta2).addcmul_(g, g, 1.0 - s.beta2);
  at::Tensor denom = (v.sqrt() / std::sqrt(s.bias2)).add_(s.eps);
  p.addcdiv_(m, denom, -s.lr / s.bias1);
}

void adamwUpdateAsCuda(float* p, const float* g, float* m, float* v, int64_t n,
                       const AdamwStep& s) {
  // Each line is one of adamwUpdate's ATen ops as its CUDA kernel computes it, the Scalars cast to
  // float as the kernels take them (value.to<float>()).
  const bool decays = s.decay != 1.0;  // adamwUpdate skips p.mul_(1)
  const float decay = float(s.decay), beta1 = float(s.beta1), beta2 = float(s.beta2);
  const float one_minus_beta1 = float(1.0 - s.beta1), one_minus_beta2 = float(1.0 - s.beta2);
  const float inv_sqrt_bias2 = 1.0f / float(std::sqrt(s.bias2));  // `/ sqrt(bias2)`: * reciprocal
  const float eps = float(s.eps), step = float(-s.lr / s.bias1);
  for (int64_t i = 0; i < n; ++i) {
    const float pi = decays ? p[i] * decay : p[i];                   // p.mul_(decay)
    const float mi = std::fma(one_minus_beta1, g[i], m[i] * beta1);  // m.mul_().add_(g, alpha)
    const float vi = std::fma(one_minus_beta2, g[i] * g[i], v[i] * beta2);  // v.mul_().addcmul_()
    const float denom = std::sqrt(vi) * inv_sqrt_bias2 + eps;  // (sqrt(v) / c).add_(eps): no fma
    m[i] = mi;
    v[i] = vi;
    p[i] = std::fma(step, mi / denom, pi);  // p.addcdiv_(m, denom, step)
  }
}

void sgdUpdateAsCuda(float* p, const float* g, int64_t n, double lr) {
  const float alpha = float(-lr);
  for (int64_t i = 0; i < n; ++i) p[i] = std::fma(alpha, g[i], p[i]);
}

void adamwUpdateMany(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v,
                     const std::vector<double>& decay, const AdamwStep& s) {
  TORCH_CHECK(g.size() == p.size() && m.size() == p.size() && v.size() == p.size() &&
                  decay.size() == p.size(),
              "adamwUpdateMany: one gradient, two moments and one decay per parameter");
  if (p.empty()) return;
  // Multiplying by a decay of 1 leaves every value as it was: adamwUpdate skips that multiply.
  const std::vector<at::Scalar> decays(decay.begin(), decay.end());
  at::_foreach_mul_(p, decays);
  at::_foreach_mul_(m, s.beta1);
  at::_foreach_add_(m, g, 1.0 - s.beta1);
  at::_foreach_mul_(v, s.beta2);
  at::_foreach_addcmul_(v, g, g, 1.0 - s.beta2);
  std::vector<at::Tensor> denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, std::sqrt(s.bias2));
  at::_foreach_add_(denom, s.eps);
  at::_foreach_addcdiv_(p, m, denom, -s.lr / s.bias1);
}

double learningRate(const ScheduleConfig& c, int step) {
  if (c.warmup > 0 && step <= c.warmup) return c.lr * step / c.warmup;
  const int span = std::max(1, c.decay_steps - c.warmup);
  const double progress = std::clamp(double(step - c.warmup) / span, 0.0, 1.0);
  return c.min_lr + 0.5 * (c.lr - c.min_lr) * (1.0 + std::cos(M_PI * progress));
}

AdamwStep adamwStep(const OptimizerConfig& config, double lr, int64_t step) {
  AdamwStep adamw;
  adamw.lr = lr;
  adamw.beta1 = config.beta1;
  adamw.beta2 = config.beta2;
  adamw.eps = config.eps;
  adamw.bias1 = 1.0 - std::pow(config.beta1, double(step));
  adamw.bias2 = 1.0 - std::pow(config.beta2, double(step));
  return adamw;
}

double adamwDecay(const OptimizerConfig& config, double lr, bool decays) {
  return decays && config.weight_decay > 0 ? 1.0 - lr * config.weight_decay : 1.0;
}

std::unique_ptr<Optimizer> makeOptimizer(ParamSet& params, DataParallelStrategy& strategy,
                                         GroupPtr dp, const OptimizerConfig& config) {
  if (strategy.memoryModel().optimizer_states_sharded) {
    if (config.offload != "none")
      return makeOffloadOptimizer(params, strategy, std::move(dp), config);
    return makeShardedOptimizer(params, strategy, std::move(dp), config);
  }
  return makeReplicatedOptimizer(params, strategy.buckets(), config);
}

}  // namespace gpttrain
