// Per-rank checkpoint files through torch::serialize archives (see checkpoint.h).
#include "checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace gpttrain {
namespace {

std::string rankFile(const std::string& dir, int rank) {
  return dir + "/rank_" + std::to_string(rank) + ".pt";
}

at::Tensor scalar(int64_t v) {
  return at::tensor({v}, at::kLong);
}

int64_t readScalar(torch::serialize::InputArchive& in, const std::string& key) {
  at::Tensor t;
  in.read(key, t);
  return t.item<int64_t>();
}

}  // namespace

void saveCheckpoint(const std::string& dir, const CheckpointLayout& layout, int step,
                    const NamedTensors& tensors, int64_t optimizer_steps, const DropoutRng& rng) {
  std::filesystem::create_directories(dir);
  torch::serialize::OutputArchive out;
  out.write("meta.step", scalar(step));
  out.write("meta.world", scalar(layout.world));
  out.write("meta.tp", scalar(layout.tp));
  out.write("meta.pp", scalar(layout.pp));
  out.write("meta.vp", scalar(layout.vp));
  out.write("meta.zero", scalar(layout.zero));
  out.write("optimizer.steps", scalar(optimizer_steps));
  for (const auto& [name, tensor] : tensors) out.write(name, tensor.detach());
  out.write("rng.replicated", rng.replicated.get_state());
  out.write("rng.sharded", rng.sharded.get_state());
  const std::string path = rankFile(dir, layout.rank);
  out.save_to(path + ".tmp");
  std::filesystem::rename(path + ".tmp", path);
}

void writeLatest(const std::string& dir, int step) {
  {
    std::ofstream latest(dir + "/latest.tmp");
    latest << step << "\n";
  }
  std::filesystem::rename(dir + "/latest.tmp", dir + "/latest");
}

int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout,
                   const NamedTensors& tensors, int64_t& optimizer_steps, DropoutRng& rng) {
  const std::string path = rankFile(dir, layout.rank);
  if (!std::filesystem::exists(dir + "/latest") || !std::filesystem::exists(path)) {
    throw std::runtime_error("--load " + dir + ": no complete checkpoint (missing latest or " +
                             path + ")");
  }
  torch::serialize::InputArchive in;
  in.load_from(path);
  const CheckpointLayout saved{
      static_cast<int>(readScalar(in, "meta.world")), static_cast<int>(readScalar(in, "meta.tp")),
      static_cast<int>(readScalar(in, "meta.pp")),    static_cast<int>(readScalar(in, "meta.vp")),
      static_cast<int>(readScalar(in, "meta.zero")),  layout.rank};
  auto describe = [](const CheckpointLayout& l) {
    return "world " + std::to_string(l.world) + " tp " + std::to_string(l.tp) + " pp " +
           std::to_string(l.pp) + " vp " + std::to_string(l.vp) + " zero " + std::to_string(l.zero);
  };
  if (describe(saved) != describe(layout)) {
    throw std::runtime_error("--load " + dir + ": saved with " + describe(saved) +
                             "; this run has " + describe(layout));
  }
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    at::Tensor t;
    try {
      in.read(name, t);
    } catch (const c10::Error&) {
      throw std::runtime_error("--load " + dir + ": " + name + " is missing in " + path);
    }
    if (!t.sizes().equals(tensor.sizes())) {
      throw std::runtime_error("--load " + dir + ": " + name +
                               " has another shape in the checkpoint");
    }
    at::Tensor target = tensor;
    target.copy_(t);
  }
  optimizer_steps = readScalar(in, "optimizer.steps");
  at::Tensor state;
  in.read("rng.replicated", state);
  rng.replicated.set_state(state);
  in.read("rng.sharded", state);
  rng.sharded.set_state(state);
  return static_cast<int>(readScalar(in, "meta.step"));
}

}  // namespace gpttrain
