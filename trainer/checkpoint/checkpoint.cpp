// Per-rank checkpoint files through torch::serialize archives (see checkpoint.h).
#include "checkpoint/checkpoint.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>

namespace gpttrain {
namespace {

// Each save goes to its own folder, so a rank that dies mid-save can never leave a mix of two
// steps behind the step DIR/latest names: latest moves only after every rank's file is complete.
std::string stepDir(const std::string& dir, int step) {
  return dir + "/step_" + std::to_string(step);
}

std::string rankFile(const std::string& dir, int step, int rank) {
  return stepDir(dir, step) + "/rank_" + std::to_string(rank) + ".pt";
}

// The step DIR/latest names, or -1 when there is none (or it is unreadable).
int readLatest(const std::string& dir) {
  std::ifstream latest(dir + "/latest");
  int step = -1;
  if (!(latest >> step)) return -1;
  return step;
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
  std::filesystem::create_directories(stepDir(dir, step));
  torch::serialize::OutputArchive out;
  out.write("meta.step", scalar(step));
  out.write("meta.world", scalar(layout.world));
  out.write("meta.tp", scalar(layout.tp));
  out.write("meta.pp", scalar(layout.pp));
  out.write("meta.vp", scalar(layout.vp));
  out.write("meta.zero", scalar(layout.zero));
  out.write("optimizer.steps", scalar(optimizer_steps));
  // Saved as CPU tensors whatever the device: a checkpoint loads on any machine, onto any device.
  for (const auto& [name, tensor] : tensors) out.write(name, tensor.detach().to(at::kCPU));
  out.write("rng.replicated", rng.replicated.get_state());
  out.write("rng.sharded", rng.sharded.get_state());
  const std::string path = rankFile(dir, step, layout.rank);
  out.save_to(path + ".tmp");
  std::filesystem::rename(path + ".tmp", path);
}

void writeLatest(const std::string& dir, int step) {
  {
    std::ofstream latest(dir + "/latest.tmp");
    latest << step << "\n";
  }
  std::filesystem::rename(dir + "/latest.tmp", dir + "/latest");
  // Older steps are garbage once latest has moved; a failure to remove them costs only disk.
  std::error_code ignored;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ignored)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("step_", 0) == 0 && name != "step_" + std::to_string(step)) {
      std::filesystem::remove_all(entry.path(), ignored);
    }
  }
}

int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout,
                   const NamedTensors& tensors, int64_t& optimizer_steps, DropoutRng& rng) {
  const int latest = readLatest(dir);
  if (latest < 0) {
    throw std::runtime_error("--load " + dir + ": no complete checkpoint (" + dir +
                             "/latest is missing or unreadable)");
  }
  const std::string path = rankFile(dir, latest, layout.rank);
  if (!std::filesystem::exists(path)) {
    throw std::runtime_error("--load " + dir + ": latest names step " + std::to_string(latest) +
                             " but " + path + " is missing");
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
    target.copy_(t);  // from the CPU onto the tensor's device
  }
  optimizer_steps = readScalar(in, "optimizer.steps");
  at::Tensor state;
  in.read("rng.replicated", state);
  rng.replicated.set_state(state);
  in.read("rng.sharded", state);
  rng.sharded.set_state(state);
  const int saved_step = static_cast<int>(readScalar(in, "meta.step"));
  if (saved_step != latest) {
    throw std::runtime_error("--load " + dir + ": " + path + " holds step " +
                             std::to_string(saved_step) + ", latest names " +
                             std::to_string(latest));
  }
  return saved_step;
}

}  // namespace gpttrain
