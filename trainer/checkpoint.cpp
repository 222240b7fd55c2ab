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
                    const ParamSet& params, Optimizer& optimizer, const DropoutRng& rng) {
  std::filesystem::create_directories(dir);
  torch::serialize::OutputArchive out;
  out.write("meta.step", scalar(step));
  out.write("meta.world", scalar(layout.world));
  out.write("meta.tp", scalar(layout.tp));
  out.write("meta.pp", scalar(layout.pp));
  out.write("optimizer.steps", scalar(optimizer.stepCount()));
  const auto& entries = params.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    out.write("param." + entries[i].name, entries[i].tensor.detach());
    if (!optimizer.expAvg().empty()) {
      out.write("exp_avg." + entries[i].name, optimizer.expAvg()[i]);
      out.write("exp_avg_sq." + entries[i].name, optimizer.expAvgSq()[i]);
    }
  }
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

int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout, ParamSet& params,
                   Optimizer& optimizer, DropoutRng& rng) {
  const std::string path = rankFile(dir, layout.rank);
  if (!std::filesystem::exists(dir + "/latest") || !std::filesystem::exists(path)) {
    throw std::runtime_error("--load " + dir + ": no complete checkpoint (missing latest or " +
                             path + ")");
  }
  torch::serialize::InputArchive in;
  in.load_from(path);
  const int64_t world = readScalar(in, "meta.world"), tp = readScalar(in, "meta.tp"),
                pp = readScalar(in, "meta.pp");
  if (world != layout.world || tp != layout.tp || pp != layout.pp) {
    throw std::runtime_error("--load " + dir + ": saved with world " + std::to_string(world) +
                             " tp " + std::to_string(tp) + " pp " + std::to_string(pp) +
                             "; this run has world " + std::to_string(layout.world) + " tp " +
                             std::to_string(layout.tp) + " pp " + std::to_string(layout.pp));
  }
  at::NoGradGuard no_grad;
  auto& entries = params.entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    at::Tensor t;
    in.read("param." + entries[i].name, t);
    if (!t.sizes().equals(entries[i].tensor.sizes())) {
      throw std::runtime_error("--load " + dir + ": parameter " + entries[i].name +
                               " has another shape in the checkpoint");
    }
    entries[i].tensor.copy_(t);
    if (!optimizer.expAvg().empty()) {
      in.read("exp_avg." + entries[i].name, t);
      optimizer.expAvg()[i].copy_(t);
      in.read("exp_avg_sq." + entries[i].name, t);
      optimizer.expAvgSq()[i].copy_(t);
    }
  }
  optimizer.stepCount() = readScalar(in, "optimizer.steps");
  at::Tensor state;
  in.read("rng.replicated", state);
  rng.replicated.set_state(state);
  in.read("rng.sharded", state);
  rng.sharded.set_state(state);
  return static_cast<int>(readScalar(in, "meta.step"));
}

}  // namespace gpttrain
