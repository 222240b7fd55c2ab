// --attention flash against standard on the CPU: forward + backward of one layer's causal
// attention core (q, k, v -> output; gradients of q, k and v), medians of interleaved repetitions,
// for sequence lengths 64 to 1024. "standard" is the model's path (model.cpp's attentionCore: the
// additive mask in baddbmm's GEMM, softmax, bmm); "flash" is model/flash_attention.h at two tile
// sizes. It prints a table; it asserts nothing, and it does not time projections or the MLP.
//
// Usage: flash_attention_bench [--quick] [--threads N] [--batch B] [--heads A] [--head-dim D]
#include "model/flash_attention.h"

#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool quick = false;
  int threads = 1;
  int64_t batch = 2, heads = 4, head_dim = 32;
};

// The standard path of model.cpp for q, k, v [BH, S, D] (the mask is a buffer there too).
at::Tensor standardAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& mask) {
  const at::Tensor scores =
      at::baddbmm(mask, q, k.transpose(1, 2), 1.0, 1.0 / std::sqrt(double(q.size(2))));
  return at::bmm(at::softmax(scores, -1), v);
}

// One forward + backward in milliseconds; `kind` 0: standard, else flash with tiles kind x kind.
double timeOnce(int kind, const at::Tensor& qkv_data, const at::Tensor& grad,
                const at::Tensor& mask) {
  at::Tensor qkv = qkv_data.detach().requires_grad_(true);  // [S, BH, 3, D]
  const auto start = Clock::now();
  const at::Tensor q = qkv.select(2, 0).transpose(0, 1);
  const at::Tensor k = qkv.select(2, 1).transpose(0, 1);
  const at::Tensor v = qkv.select(2, 2).transpose(0, 1);
  const at::Tensor out = kind == 0 ? standardAttention(q, k, v, mask)
                                   : gpttrain::flashAttention(q, k, v, {kind, kind});
  out.backward(grad);
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return ms;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() -> int64_t {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "flash_attention_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return std::stoll(argv[++i]);
    };
    if (a == "--quick") {
      o.quick = true;
    } else if (a == "--threads") {
      o.threads = int(next());
    } else if (a == "--batch") {
      o.batch = next();
    } else if (a == "--heads") {
      o.heads = next();
    } else if (a == "--head-dim") {
      o.head_dim = next();
    } else if (a == "--help") {
      std::printf(
          "usage: flash_attention_bench [--quick] [--threads N] [--batch B] [--heads A] "
          "[--head-dim D]\n");
      std::exit(0);
    } else {
      std::fprintf(stderr, "flash_attention_bench: unknown argument '%s' (see --help)\n",
                   a.c_str());
      std::exit(2);
    }
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = parse(argc, argv);
  at::set_num_threads(o.threads);
  at::manual_seed(1);
  const int64_t bh = o.batch * o.heads, d = o.head_dim;
  const int kinds[] = {0, 64, 128};
  std::printf(
      "causal attention forward + backward, fp32 CPU, %d thread(s), b %lld x heads %lld, "
      "head_dim %lld; medians (ms)\n",
      o.threads, static_cast<long long>(o.batch), static_cast<long long>(o.heads),
      static_cast<long long>(d));
  std::printf("%6s %12s %12s %12s %12s %12s %16s\n", "s", "standard", "flash 64", "flash 128",
              "64/standard", "128/standard", "saved s^2 (MiB)");
  for (int64_t s : {64, 128, 256, 512, 1024}) {
    const at::Tensor qkv = at::randn({s, bh, 3, d});
    const at::Tensor grad = at::randn({bh, s, d});
    const at::Tensor mask = at::full({s, s}, -std::numeric_limits<float>::infinity()).triu(1);
    const int reps = o.quick ? 3 : (s >= 512 ? 7 : 15);
    std::vector<double> times[3];
    for (int k = 0; k < 3; ++k) timeOnce(kinds[k], qkv, grad, mask);  // warm-up
    for (int r = 0; r < reps; ++r) {
      for (int k = 0; k < 3; ++k) times[k].push_back(timeOnce(kinds[k], qkv, grad, mask));
    }
    const double st = median(times[0]), f64 = median(times[1]), f128 = median(times[2]);
    // The probabilities standard keeps for backward and flash does not (less the log-sum-exp).
    const double saved_mib = double(4 * (bh * s * s - bh * s)) / (1 << 20);
    std::printf("%6lld %12.3f %12.3f %12.3f %12.2f %12.2f %16.2f\n", static_cast<long long>(s), st,
                f64, f128, f64 / st, f128 / st, saved_mib);
  }
  return 0;
}
