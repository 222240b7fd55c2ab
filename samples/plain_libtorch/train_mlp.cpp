// A plain libtorch training program that knows nothing of tracerun: a small MLP regressing a
// fixed random target with Adam. Run it under `tracerun -o run.db -- ./plain_libtorch_mlp`.
// Usage: plain_libtorch_mlp [steps] [batch] [hidden]
#include <torch/torch.h>

#include <cstdio>
#include <cstdlib>

struct MlpImpl : torch::nn::Module {
  MlpImpl(int64_t in, int64_t hidden, int64_t out)
      : fc1(register_module("fc1", torch::nn::Linear(in, hidden))),
        fc2(register_module("fc2", torch::nn::Linear(hidden, out))) {}
  torch::Tensor forward(torch::Tensor x) { return fc2(torch::relu(fc1(x))); }
  torch::nn::Linear fc1, fc2;
};
TORCH_MODULE(Mlp);

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 5;
  const int64_t batch = argc > 2 ? std::atoll(argv[2]) : 16;
  const int64_t hidden = argc > 3 ? std::atoll(argv[3]) : 32;
  torch::manual_seed(0);
  Mlp model(8, hidden, 1);
  torch::optim::Adam optimizer(model->parameters(), torch::optim::AdamOptions(1e-2));
  const torch::Tensor x = torch::randn({batch, 8});
  const torch::Tensor y = torch::randn({batch, 1});
  for (int step = 0; step < steps; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
    std::printf("step %d loss %.6f\n", step, loss.item<float>());
  }
  return 0;
}
