// A small libtorch training program for optimizer_steps_test: an MLP trained with one of
// libtorch's own optimizers, unmodified unless asked (--tag calls tracerun::tagTraining,
// --own-steps wraps each iteration in tracerun::Step). With --print-clock it prints, per iteration
// k, "clock step k BEGIN END": CLOCK_MONOTONIC ns read before the iteration's first op and right
// after optimizer.step() returned, the truth the test holds the trace's step spans against. Each
// iteration sleeps 3 ms after its backward, so that iterations lie further apart than the 1 ms
// the test allows for the trace clock's fit to CLOCK_MONOTONIC.
//
// optimizer_steps_prog [--optimizer sgd|adam|adamw|adagrad|rmsprop|lbfgs] [--steps N] [--virtual]
//                      [--tag] [--own-steps] [--iteration-scope] [--eval-after] [--print-clock]
// (--iteration-scope: each iteration inside a tracerun::Scope "iteration" of the program's own,
// which goes on 3 ms after optimizer.step() returned.)
#include <time.h>
#include <torch/torch.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>

#include "tracerun/annotate.h"
#include "tracerun/annotate_training.h"

namespace {

int64_t monotonicNs() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

std::unique_ptr<torch::optim::Optimizer> makeOptimizer(const std::string& kind,
                                                       std::vector<torch::Tensor> params) {
  using namespace torch::optim;
  if (kind == "sgd") return std::make_unique<SGD>(params, SGDOptions(0.01).momentum(0.9));
  if (kind == "adam") return std::make_unique<Adam>(params, AdamOptions(1e-3));
  if (kind == "adamw") return std::make_unique<AdamW>(params, AdamWOptions(1e-3));
  if (kind == "adagrad") return std::make_unique<Adagrad>(params, AdagradOptions(1e-2));
  if (kind == "rmsprop") return std::make_unique<RMSprop>(params, RMSpropOptions(1e-3));
  if (kind == "lbfgs") return std::make_unique<LBFGS>(params, LBFGSOptions(0.1).max_iter(2));
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  std::string kind = "adam";
  int steps = 5;
  bool viaBase = false, tag = false, ownSteps = false, evalAfter = false, printClock = false;
  bool iterationScope = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--optimizer" && i + 1 < argc)
      kind = argv[++i];
    else if (a == "--steps" && i + 1 < argc)
      steps = std::atoi(argv[++i]);
    else if (a == "--virtual")
      viaBase = true;
    else if (a == "--tag")
      tag = true;
    else if (a == "--own-steps")
      ownSteps = true;
    else if (a == "--eval-after")
      evalAfter = true;
    else if (a == "--iteration-scope")
      iterationScope = true;
    else if (a == "--print-clock")
      printClock = true;
    else {
      std::fprintf(stderr, "optimizer_steps_prog: unknown argument %s\n", argv[i]);
      return 2;
    }
  }
  torch::manual_seed(0);
  torch::set_num_threads(1);
  torch::nn::Sequential model(torch::nn::Linear(16, 32), torch::nn::ReLU(),
                              torch::nn::Linear(32, 4));
  auto optimizer = makeOptimizer(kind, model->parameters());
  if (!optimizer) {
    std::fprintf(stderr, "optimizer_steps_prog: unknown optimizer %s\n", kind.c_str());
    return 2;
  }
  const torch::Tensor x = torch::randn({8, 16});
  const torch::Tensor y = torch::randint(0, 4, {8});
  if (tag) tracerun::tagTraining(*model, *optimizer);
  for (int k = 1; k <= steps; ++k) {
    const int64_t begin = monotonicNs();
    std::unique_ptr<tracerun::Step> own;
    if (ownSteps) own = std::make_unique<tracerun::Step>(k);
    std::unique_ptr<tracerun::Scope> iteration;
    if (iterationScope) iteration = std::make_unique<tracerun::Scope>("iteration");
    const auto closure = [&] {
      optimizer->zero_grad();
      torch::Tensor loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      return loss;
    };
    torch::Tensor loss;
    if (kind == "lbfgs") {
      loss = optimizer->step(closure);  // forward and backward inside the step
    } else {
      loss = closure();
      if (viaBase) {
        torch::optim::Optimizer& base = *optimizer;  // through the vtable
        base.step();
      } else if (kind == "sgd") {
        static_cast<torch::optim::SGD&>(*optimizer).step();  // devirtualised: through the PLT
      } else {
        optimizer->step();
      }
    }
    if (iteration) {  // the iteration goes on 3 ms after its step(): the step must wait for it
      std::this_thread::sleep_for(std::chrono::milliseconds(3));
      iteration.reset();
    }
    const int64_t end = monotonicNs();
    own.reset();
    if (printClock) std::printf("clock step %d %lld %lld\n", k, (long long)begin, (long long)end);
    std::printf("step %d loss %.6f\n", k, loss.item<double>());
  }
  if (evalAfter) {
    torch::NoGradGuard noGrad;
    std::printf("eval %.6f\n", model->forward(x).sum().item<double>());
  }
  return 0;
}
