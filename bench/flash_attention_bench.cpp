// --attention flash against standard: forward + backward of one layer's causal attention core
// (q, k, v -> output; gradients of q, k and v), medians of interleaved repetitions, for sequence
// lengths 64 to 1024. "standard" is the model's path (model.cpp's attentionCore: the additive mask
// in baddbmm's GEMM, softmax, bmm); "flash" is model/flash_attention.h: on the CPU our tiled code
// at two tile sizes, on CUDA (`--device cuda`, libtorch 2.x) at::scaled_dot_product_attention,
// whose kernel the table names (flash, efficient, cudnn, math). It prints a table; it asserts
// nothing, and it does not time projections or the MLP.
//
// Usage: flash_attention_bench [--quick] [--threads N] [--batch B] [--heads A] [--head-dim D]
//                              [--device cpu|cuda] [--dtype fp32|bf16]
#include "model/flash_attention.h"

#include <torch/cuda.h>
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
  bool cuda = false;
  bool bf16 = false;
};

// The standard path of model.cpp for q, k, v [BH, S, D] (the mask is a buffer there too).
at::Tensor standardAttention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const at::Tensor& mask) {
  const at::Tensor scores =
      at::baddbmm(mask, q, k.transpose(1, 2), 1.0, 1.0 / std::sqrt(double(q.size(2))));
  return at::bmm(at::softmax(scores, -1), v);
}

// On CUDA a time is from a synchronised start to the synchronised end of the backward.
void synchronize(const at::Tensor& t) {
  if (t.is_cuda()) torch::cuda::synchronize();
}

// One forward + backward in milliseconds; `kind` 0: standard, else flash with tiles kind x kind
// (on CUDA any kind but 0 is SDPA, whose tiles are its own).
double timeOnce(int kind, const at::Tensor& qkv_data, const at::Tensor& grad,
                const at::Tensor& mask) {
  at::Tensor qkv = qkv_data.detach().requires_grad_(true);  // [S, BH, 3, D]
  synchronize(qkv);
  const auto start = Clock::now();
  const at::Tensor q = qkv.select(2, 0).transpose(0, 1);
  const at::Tensor k = qkv.select(2, 1).transpose(0, 1);
  const at::Tensor v = qkv.select(2, 2).transpose(0, 1);
  const at::Tensor out = kind == 0 ? standardAttention(q, k, v, mask)
                                   : gpttrain::flashAttention(q, k, v, {kind, kind});
  out.backward(grad);
  synchronize(qkv);
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
    } else if (a == "--device" || a == "--dtype") {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "flash_attention_bench: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      const std::string value = argv[++i];
      if (a == "--device" && (value == "cpu" || value == "cuda")) {
        o.cuda = value == "cuda";
      } else if (a == "--dtype" && (value == "fp32" || value == "bf16")) {
        o.bf16 = value == "bf16";
      } else {
        std::fprintf(stderr, "flash_attention_bench: %s %s: expected %s\n", a.c_str(),
                     value.c_str(), a == "--device" ? "cpu or cuda" : "fp32 or bf16");
        std::exit(2);
      }
    } else if (a == "--help") {
      std::printf(
          "usage: flash_attention_bench [--quick] [--threads N] [--batch B] [--heads A] "
          "[--head-dim D] [--device cpu|cuda] [--dtype fp32|bf16]\n");
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
  if (o.cuda && !torch::cuda::is_available()) {
    std::fprintf(stderr,
                 "flash_attention_bench: --device cuda: this libtorch sees no CUDA device\n");
    return 2;
  }
  if (o.bf16 && !o.cuda) {
    std::fprintf(stderr, "flash_attention_bench: --dtype bf16 is for --device cuda\n");
    return 2;
  }
  at::set_num_threads(o.threads);
  at::manual_seed(1);
  const int64_t bh = o.batch * o.heads, d = o.head_dim;
  const auto options = at::TensorOptions()
                           .device(o.cuda ? at::kCUDA : at::kCPU)
                           .dtype(o.bf16 ? at::kBFloat16 : at::kFloat);
  // CPU: standard and our tiles at 64 and 128; CUDA: standard and SDPA (its tiles are its own).
  const std::vector<int> kinds = o.cuda ? std::vector<int>{0, 1} : std::vector<int>{0, 64, 128};
  std::printf(
      "causal attention forward + backward, %s %s, %d thread(s), b %lld x heads %lld, "
      "head_dim %lld; medians (ms)\n",
      o.bf16 ? "bf16" : "fp32", o.cuda ? "CUDA" : "CPU", o.threads, static_cast<long long>(o.batch),
      static_cast<long long>(o.heads), static_cast<long long>(d));
  if (o.cuda) {
    std::printf("%6s %12s %12s %16s %16s  %s\n", "s", "standard", "flash", "flash/standard",
                "saved s^2 (MiB)", "SDPA kernel");
  } else {
    std::printf("%6s %12s %12s %12s %12s %12s %16s\n", "s", "standard", "flash 64", "flash 128",
                "64/standard", "128/standard", "saved s^2 (MiB)");
  }
  for (int64_t s : {64, 128, 256, 512, 1024}) {
    const at::Tensor qkv = at::randn({s, bh, 3, d}, options);
    const at::Tensor grad = at::randn({bh, s, d}, options);
    const at::Tensor mask =
        at::full({s, s}, -std::numeric_limits<float>::infinity(), options).triu(1);
    const int reps = o.quick ? 3 : (s >= 512 ? 7 : 15);
    std::vector<std::vector<double>> times(kinds.size());
    for (int kind : kinds) timeOnce(kind, qkv, grad, mask);  // warm-up
    for (int r = 0; r < reps; ++r) {
      for (size_t k = 0; k < kinds.size(); ++k) {
        times[k].push_back(timeOnce(kinds[k], qkv, grad, mask));
      }
    }
    // The probabilities standard keeps for backward and flash does not (less the log-sum-exp).
    const double saved_mib = double(qkv.element_size() * (bh * s * s - bh * s)) / (1 << 20);
    const double st = median(times[0]);
    if (o.cuda) {
      const at::Tensor q = qkv.select(2, 0).transpose(0, 1);
      const double fl = median(times[1]);
      std::printf("%6lld %12.3f %12.3f %16.2f %16.2f  %s\n", static_cast<long long>(s), st, fl,
                  fl / st, saved_mib, gpttrain::flashKernelName(q, q, q).c_str());
    } else {
      const double f64 = median(times[1]), f128 = median(times[2]);
      std::printf("%6lld %12.3f %12.3f %12.3f %12.2f %12.2f %16.2f\n", static_cast<long long>(s),
                  st, f64, f128, f64 / st, f128 / st, saved_mib);
    }
  }
  return 0;
}
