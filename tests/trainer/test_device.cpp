// Device placement (--device cpu|cuda): the explicit --device cpu runs exactly like the default;
// --device cuda where it cannot run is one line and exit code 2; a Trainer built for a device holds
// every parameter, gradient buffer and optimizer state there. This machine has no GPU: the last
// check runs on the meta device (a device other than the CPU, so anything created with a
// hard-coded CPU device shows up) and on an explicitly given CPU device. (A forward on the meta
// device would check activations and buffers too, but libtorch 1.13 has no meta kernels for
// index_select or layer_norm.)
#include "parallel/process_groups.h"
#include "trainer.h"
#include "trainer_test_util.h"

#include <torch/cuda.h>
#include <catch2/catch.hpp>

using namespace gpttrain;
using namespace gpttrain::testing;

namespace {

int lineCount(const std::string& text) {
  int n = 0;
  for (char c : text) n += c == '\n';
  return n;
}

// Every tensor `trainer` holds, and its dropout generators, are on `device` (generators: CUDA
// generators on CUDA, CPU generators on any other device).
void checkPlacement(Trainer& trainer, torch::Device device, const std::string& what) {
  const NamedTensors held = trainer.heldTensors();
  size_t params = 0, buckets = 0, states = 0;
  for (const auto& [name, tensor] : held) {
    INFO(what << ": " << name << " is on " << tensor.device() << ", want " << device);
    CHECK(tensor.device() == device);
    params += name.rfind("param.", 0) == 0;
    buckets += name.rfind("bucket.", 0) == 0;
    states += name.find("exp_avg") != std::string::npos;
  }
  INFO(what);
  CHECK(params > 0);  // the lists are not empty by accident
  CHECK(buckets > 0);
  CHECK(states > 0);
  const torch::Device generators = device.is_cuda() ? device : torch::Device(torch::kCPU);
  CHECK(trainer.dropoutRng().replicated.device() == generators);
  CHECK(trainer.dropoutRng().sharded.device() == generators);
}

}  // namespace

TEST_CASE("an explicit --device cpu trains exactly like the default", "[trainer][device]") {
  const std::string dir = scratchDir("device_cpu");
  struct Layout {
    const char* name;
    int ranks;
    std::vector<std::string> flags;
  };
  // Dropout 0.1: the generators are made through the device-aware path too.
  const std::vector<std::string> common =
      tinyModelArgs() + std::vector<std::string>{"--steps", "2", "--dropout", "0.1"};
  for (const Layout& layout : {Layout{"single", 0, {}}, Layout{"pp2", 2, {"--pp", "2"}}}) {
    std::vector<std::vector<double>> losses;
    for (const char* device : {"", "cpu"}) {
      const std::string name = std::string(layout.name) + (*device ? "_cpu" : "_default");
      std::vector<std::string> flags =
          common + layout.flags + std::vector<std::string>{"--log-json", dir + "/" + name};
      if (*device) flags = flags + std::vector<std::string>{"--device", device};
      auto run = launchRanks(kGpttrain, flags, layout.ranks, dir + "/" + name + "_logs");
      INFO(name << "\n" << run.summary());
      REQUIRE(run.ok());
      losses.push_back(jsonValues(dir + "/" + name, "loss"));
      REQUIRE(losses.back().size() == 2);
    }
    INFO(layout.name);
    CHECK(losses[1] == losses[0]);  // identical, not close
  }
}

TEST_CASE("asking for --device cuda where it cannot run: one line naming CUDA, exit code 2",
          "[trainer][device][cli]") {
  if (torch::cuda::is_available()) {
    WARN("a CUDA device is visible: --device cuda can run here, nothing to refuse");
    return;
  }
  const std::string dir = scratchDir("device_cuda");
  auto run = launchRanks(kGpttrain, tinyModelArgs() + std::vector<std::string>{"--device", "cuda"},
                         0, dir);
  INFO(run.summary());
  CHECK(run.exit_codes[0] == 2);
  CHECK(lineCount(run.logs[0]) == 1);
  CHECK(run.logs[0].rfind("gpttrain: --device cuda", 0) == 0);
  CHECK(run.logs[0].find("CUDA") != std::string::npos);
#if !defined(TRACERUN_TORCH_HAS_CUDA)
  CHECK(run.logs[0].find("needs a libtorch built with CUDA") != std::string::npos);
#endif
}

TEST_CASE("a trainer holds parameters, gradient buckets and optimizer states on its device",
          "[trainer][device][units]") {
  LaunchEnv env;  // one process
  for (int zero : {0, 1, 2, 3}) {
    for (const torch::Device device : {torch::Device(torch::kCPU), torch::Device(torch::kMeta)}) {
      TrainConfig config;
      config.layers = 2;
      config.hidden = 32;
      config.heads = 4;
      config.seq_len = 16;
      config.vocab = 64;
      config.zero = zero;
      config.bucket_mb = 0.02;  // several buckets
      config.quiet = true;
      ProcessGroups groups = makeProcessGroups(env, config.tp, config.pp);
      Trainer trainer(config, groups, device);
      CHECK(trainer.device() == device);
      checkPlacement(trainer, device, "zero " + std::to_string(zero) + " on " + device.str());
    }
  }
}
