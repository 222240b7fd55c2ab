// ResNet-18 (torchvision's layout: BasicBlocks [2, 2, 2, 2], 10 classes) written with libtorch's
// C++ API, each module's forward annotated with tracerun::ModuleScope, trained for STEPS steps
// (default 1) on random 32x32 images: the C++ twin of samples/python/resnet18_step.py for
// `tracedot model`. Each step is a tracerun::Step, and tracerun::tagTraining (annotate_training.h)
// tags parameters, gradients and SGD's momentum after it: the report's memory categories.
// Not a faithful torchvision port beyond the layer shapes (default initialisation, no pretrained
// weights).
//   tracerun -o resnet18_cpp.db -- build/samples/resnet18_cpp [BATCH] [STEPS]
//   tracedot model resnet18_cpp.db -o resnet18_cpp.svg
#include <torch/torch.h>
#include <tracerun/annotate.h>
#include <tracerun/annotate_training.h>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

int64_t paramCount(const torch::nn::Module& m) {
  int64_t n = 0;
  for (const auto& p : m.parameters()) n += p.numel();
  return n;
}

// "Conv2d in=f32[8,3,32,32]": the module type and its input shape, as the Python hooks record it
// (formatted only while tracerun captures).
std::string detail(const char* type, const at::Tensor& x) {
  std::string d = type;
  if (!tracerun::capturing()) return d;
  d += " in=f32[";
  for (int64_t i = 0; i < x.dim(); ++i) d += (i ? "," : "") + std::to_string(x.size(i));
  return d + "]";
}

// Runs `fn` inside a module scope named `path`.
template <class Fn>
at::Tensor scoped(const std::string& path, const char* type, int64_t params, const at::Tensor& x,
                  Fn&& fn) {
  const std::string d = detail(type, x);
  tracerun::ModuleScope scope(path.c_str(), d.c_str(), params);
  return fn(x);
}

torch::nn::Conv2d conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t pad) {
  return torch::nn::Conv2d(
      torch::nn::Conv2dOptions(in, out, k).stride(stride).padding(pad).bias(false));
}

struct BasicBlockImpl : torch::nn::Module {
  BasicBlockImpl(std::string path, int64_t in, int64_t out, int64_t stride)
      : path(std::move(path)) {
    conv1 = register_module("conv1", conv(in, out, 3, stride, 1));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(out));
    conv2 = register_module("conv2", conv(out, out, 3, 1, 1));
    bn2 = register_module("bn2", torch::nn::BatchNorm2d(out));
    if (stride != 1 || in != out) {
      downsample = register_module(
          "downsample",
          torch::nn::Sequential(conv(in, out, 1, stride, 0), torch::nn::BatchNorm2d(out)));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    return scoped(path, "BasicBlock", paramCount(*this), x, [&](const at::Tensor& in) {
      auto relu = [&](const at::Tensor& t) {
        return scoped(path + ".relu", "ReLU", 0, t,
                      [](const at::Tensor& v) { return torch::relu(v); });
      };
      at::Tensor out = scoped(path + ".conv1", "Conv2d", paramCount(*conv1), in,
                              [&](const at::Tensor& v) { return conv1->forward(v); });
      out = scoped(path + ".bn1", "BatchNorm2d", paramCount(*bn1), out,
                   [&](const at::Tensor& v) { return bn1->forward(v); });
      out = relu(out);
      out = scoped(path + ".conv2", "Conv2d", paramCount(*conv2), out,
                   [&](const at::Tensor& v) { return conv2->forward(v); });
      out = scoped(path + ".bn2", "BatchNorm2d", paramCount(*bn2), out,
                   [&](const at::Tensor& v) { return bn2->forward(v); });
      at::Tensor identity = in;
      if (!downsample.is_empty()) {
        identity = scoped(
            path + ".downsample", "Sequential", paramCount(*downsample), in,
            [&](const at::Tensor& v) {
              at::Tensor y = scoped(path + ".downsample.0", "Conv2d", paramCount(*downsample[0]), v,
                                    [&](const at::Tensor& w) {
                                      return downsample[0]->as<torch::nn::Conv2d>()->forward(w);
                                    });
              return scoped(path + ".downsample.1", "BatchNorm2d", paramCount(*downsample[1]), y,
                            [&](const at::Tensor& w) {
                              return downsample[1]->as<torch::nn::BatchNorm2d>()->forward(w);
                            });
            });
      }
      return relu(out + identity);
    });
  }

  std::string path;
  torch::nn::Conv2d conv1{nullptr}, conv2{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr}, bn2{nullptr};
  torch::nn::Sequential downsample{nullptr};
};
TORCH_MODULE(BasicBlock);

struct ResNet18Impl : torch::nn::Module {
  explicit ResNet18Impl(int64_t classes) {
    conv1 = register_module("conv1", conv(3, 64, 7, 2, 3));
    bn1 = register_module("bn1", torch::nn::BatchNorm2d(64));
    const int64_t widths[] = {64, 128, 256, 512};
    int64_t in = 64;
    for (int l = 0; l < 4; ++l) {
      const std::string name = "layer" + std::to_string(l + 1);
      for (int b = 0; b < 2; ++b) {
        const int64_t stride = (l > 0 && b == 0) ? 2 : 1;
        layers[l].push_back(
            register_module(name + "_" + std::to_string(b),
                            BasicBlock(name + "." + std::to_string(b), in, widths[l], stride)));
        in = widths[l];
      }
    }
    fc = register_module("fc", torch::nn::Linear(512, classes));
  }

  at::Tensor forward(const at::Tensor& x) {
    return scoped("ResNet", "ResNet", paramCount(*this), x, [&](const at::Tensor& in) {
      at::Tensor y = scoped("conv1", "Conv2d", paramCount(*conv1), in,
                            [&](const at::Tensor& v) { return conv1->forward(v); });
      y = scoped("bn1", "BatchNorm2d", paramCount(*bn1), y,
                 [&](const at::Tensor& v) { return bn1->forward(v); });
      y = scoped("relu", "ReLU", 0, y, [](const at::Tensor& v) { return torch::relu(v); });
      y = scoped("maxpool", "MaxPool2d", 0, y, [](const at::Tensor& v) {
        return torch::max_pool2d(v, /*kernel_size=*/3, /*stride=*/2, /*padding=*/1);
      });
      for (int l = 0; l < 4; ++l) {
        int64_t params = 0;
        for (auto& block : layers[l]) params += paramCount(*block);
        y = scoped("layer" + std::to_string(l + 1), "Sequential", params, y,
                   [&](const at::Tensor& v) {
                     at::Tensor h = v;
                     for (auto& block : layers[l]) h = block->forward(h);
                     return h;
                   });
      }
      y = scoped("avgpool", "AdaptiveAvgPool2d", 0, y, [](const at::Tensor& v) {
        return torch::adaptive_avg_pool2d(v, {1, 1});
      });
      y = torch::flatten(y, 1);
      return scoped("fc", "Linear", paramCount(*fc), y,
                    [&](const at::Tensor& v) { return fc->forward(v); });
    });
  }

  torch::nn::Conv2d conv1{nullptr};
  torch::nn::BatchNorm2d bn1{nullptr};
  std::vector<BasicBlock> layers[4];
  torch::nn::Linear fc{nullptr};
};
TORCH_MODULE(ResNet18);

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = argc > 1 ? std::atoll(argv[1]) : 8;
  const int64_t steps = argc > 2 ? std::atoll(argv[2]) : 1;
  torch::manual_seed(0);
  at::set_num_threads(1);
  ResNet18 model(10);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
  const at::Tensor images = torch::randn({batch, 3, 32, 32});
  const at::Tensor labels = torch::randint(0, 10, {batch});

  at::Tensor loss;
  for (int64_t s = 0; s < steps; ++s) {
    tracerun::Step step(s);
    optimizer.zero_grad();
    const at::Tensor logits = model->forward(images);
    loss = scoped("CrossEntropyLoss", "CrossEntropyLoss", 0, logits,
                  [&](const at::Tensor& v) { return torch::cross_entropy_loss(v, labels); });
    loss.backward();
    optimizer.step();
    tracerun::tagTraining(*model, optimizer);  // parameters, gradients, momentum: categories
  }
  std::printf("resnet18_cpp: %lld parameters, loss %.4f\n",
              static_cast<long long>(paramCount(*model)), loss.item<double>());
  return 0;
}
