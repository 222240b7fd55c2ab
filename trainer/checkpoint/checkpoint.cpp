// Per-rank checkpoint files through torch::serialize archives, and their re-cut at another
// data-parallel size (see checkpoint.h).
#include "checkpoint/checkpoint.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
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

namespace {

std::string describe(const CheckpointLayout& l) {
  return "world " + std::to_string(l.world) + " tp " + std::to_string(l.tp) + " pp " +
         std::to_string(l.pp) + " vp " + std::to_string(l.vp) + " zero " + std::to_string(l.zero);
}

// One saved rank's archive, opened (throws naming the missing file).
struct SavedRank {
  std::string path;
  torch::serialize::InputArchive in;
};

std::unique_ptr<SavedRank> openRank(const std::string& dir, int latest, int rank) {
  auto saved = std::make_unique<SavedRank>();
  saved->path = rankFile(dir, latest, rank);
  if (!std::filesystem::exists(saved->path)) {
    throw std::runtime_error("--load " + dir + ": latest names step " + std::to_string(latest) +
                             " but " + saved->path + " is missing");
  }
  saved->in.load_from(saved->path);
  return saved;
}

CheckpointLayout savedLayout(torch::serialize::InputArchive& in, int rank) {
  return CheckpointLayout{
      static_cast<int>(readScalar(in, "meta.world")), static_cast<int>(readScalar(in, "meta.tp")),
      static_cast<int>(readScalar(in, "meta.pp")),    static_cast<int>(readScalar(in, "meta.vp")),
      static_cast<int>(readScalar(in, "meta.zero")),  rank};
}

at::Tensor readTensor(SavedRank& saved, const std::string& dir, const std::string& name) {
  at::Tensor t;
  try {
    saved.in.read(name, t);
  } catch (const c10::Error&) {
    throw std::runtime_error("--load " + dir + ": " + name + " is missing in " + saved.path);
  }
  return t;
}

// A ZeRO shard ("zero.*": 1-D slices of a bucket padded to a multiple of the DP size, slice d on
// DP rank d) re-cut for `dp` of `n` elements each: the saved DP ranks' slices laid end to end give
// the padded bucket back; elements past its end are padding (zeros).
at::Tensor recutShard(std::vector<std::unique_ptr<SavedRank>>& sources, const std::string& dir,
                      const std::string& name, int dp, int64_t n) {
  std::vector<at::Tensor> pieces;
  for (auto& s : sources) pieces.push_back(readTensor(*s, dir, name).reshape({-1}));
  const at::Tensor whole = at::cat(pieces);
  at::Tensor out = at::zeros({n}, whole.options());
  const int64_t begin = std::min<int64_t>(int64_t{dp} * n, whole.numel());
  const int64_t end = std::min<int64_t>(begin + n, whole.numel());
  if (end > begin) out.narrow(0, 0, end - begin).copy_(whole.narrow(0, begin, end - begin));
  return out;
}

}  // namespace

int loadCheckpoint(const std::string& dir, const CheckpointLayout& layout,
                   const NamedTensors& tensors, int64_t& optimizer_steps, DropoutRng& rng) {
  const int latest = readLatest(dir);
  if (latest < 0) {
    throw std::runtime_error("--load " + dir + ": no complete checkpoint (" + dir +
                             "/latest is missing or unreadable)");
  }
  // Rank 0 exists in every layout: its file says how the checkpoint was cut.
  std::unique_ptr<SavedRank> first = openRank(dir, latest, 0);
  const CheckpointLayout saved = savedLayout(first->in, layout.rank);
  CheckpointLayout saved_here = saved;  // the saved layout at this run's world size
  saved_here.world = layout.world;
  if (describe(saved_here) != describe(layout)) {
    throw std::runtime_error("--load " + dir + ": saved with " + describe(saved) +
                             "; this run has " + describe(layout) +
                             " (only the data-parallel size may change on load: tp, pp, vp and "
                             "zero stay)");
  }
  // This rank's place (rank_grid.h: rank = tp + T * (dp + DP * pp)) and the saved ranks of the
  // same tp, pp coordinates, in DP order. The same world: this rank's own file alone.
  const int mp = layout.tp * layout.pp;
  const int dp_now = layout.world / mp, dp_saved = saved.world / mp;
  const int tp = layout.rank % layout.tp;
  const int dp = (layout.rank / layout.tp) % dp_now;
  const int pp = layout.rank / layout.tp / dp_now;
  const bool reshard = saved.world != layout.world;
  // Chimera's two pipelines use another rank grid (its stages' tied-embedding copy is the one name
  // only it has): its checkpoints load at their own size only.
  for (const auto& named : tensors) {
    if (reshard && named.first.find("embedding.word.weight.head") != std::string::npos) {
      throw std::runtime_error("--load " + dir + ": saved at world " + std::to_string(saved.world) +
                               "; a --schedule chimera checkpoint " +
                               "loads only at the world size it was saved at");
    }
  }
  std::vector<std::unique_ptr<SavedRank>> sources;
  for (int d = 0; d < (reshard ? dp_saved : 1); ++d) {
    const int r = reshard ? tp + layout.tp * (d + dp_saved * pp) : layout.rank;
    sources.push_back(r == 0 ? std::move(first) : openRank(dir, latest, r));
  }
  // Replicated state (everything but ZeRO shards) and the generators come from the saved DP rank
  // dp mod DP_saved (its own file when the world is unchanged).
  SavedRank& mine = *sources[static_cast<size_t>(reshard ? dp % dp_saved : 0)];
  at::NoGradGuard no_grad;
  for (const auto& [name, tensor] : tensors) {
    const bool shard = reshard && name.rfind("zero.", 0) == 0;
    at::Tensor t =
        shard ? recutShard(sources, dir, name, dp, tensor.numel()) : readTensor(mine, dir, name);
    if (!t.sizes().equals(tensor.sizes())) {
      throw std::runtime_error("--load " + dir + ": " + name +
                               " has another shape in the checkpoint");
    }
    at::Tensor target = tensor;
    target.copy_(t);  // from the CPU onto the tensor's device
  }
  optimizer_steps = readScalar(mine.in, "optimizer.steps");
  at::Tensor state;
  mine.in.read("rng.replicated", state);
  rng.replicated.set_state(state);
  mine.in.read("rng.sharded", state);
  rng.sharded.set_state(state);
  const int saved_step = static_cast<int>(readScalar(mine.in, "meta.step"));
  if (saved_step != latest) {
    throw std::runtime_error("--load " + dir + ": " + mine.path + " holds step " +
                             std::to_string(saved_step) + ", latest names " +
                             std::to_string(latest));
  }
  return saved_step;
}

}  // namespace gpttrain
