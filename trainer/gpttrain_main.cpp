// gpttrain's entry point: flags, layout check, thread pinning, process groups, then the trainer.
// Exit codes: 0 done, 2 bad flags / impossible layout / unusable input, 1 anything else.
#include "config.h"
#include "data/data.h"
#include "parallel/process_groups.h"
#include "trainer.h"

#include <dlfcn.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include <c10/core/DeviceGuard.h>

#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <optional>

namespace {

// Torch intra-op threads and OpenBLAS threads add up (shared/NOTES.md): pin both.
void pinThreads(int threads) {
  at::set_num_threads(threads);
  using SetThreads = void (*)(int);
  if (auto set = reinterpret_cast<SetThreads>(dlsym(RTLD_DEFAULT, "openblas_set_num_threads"))) {
    set(threads);
  }
}

// Every microbatch frees its activations and allocates them again at the same sizes. By default
// glibc gives each block over its dynamic mmap threshold (at most 32 MiB) its own mapping, unmapped
// on free, and trims the heap top after a large free: each page of such a tensor then costs a page
// fault and a zero-fill on first touch, every microbatch (some 40,000 faults, 4% of a step at the
// benchmark's target size; docs/performance.md). So large blocks come from the heap and the heap
// keeps its pages. Process-wide, so set once here; glibc only.
void keepFreedMemoryMapped() {
#if defined(__GLIBC__)
  constexpr int kOneGiB = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kOneGiB);
  mallopt(M_TRIM_THRESHOLD, kOneGiB);
#endif
}

// --dump-init DIR: the initial parameters as raw little-endian fp32 (params.bin, in the order and
// with the names and shapes of manifest.json), every step's global batch as int64 tokens
// (tokens.bin: [steps][global batch][seq_len + 1], inputs then the next tokens) and the model and
// optimiser settings, resolved as the trainer resolves them. Read by
// tests/trainer/reference_gpt.py.
void dumpInit(const gpttrain::TrainConfig& c, gpttrain::Trainer& trainer) {
  namespace fs = std::filesystem;
  fs::create_directories(c.dump_init);
  const fs::path dir(c.dump_init);
  std::ofstream params(dir / "params.bin", std::ios::binary);
  std::ofstream manifest(dir / "manifest.json");
  manifest << "{\"layers\":" << c.layers << ",\"hidden\":" << c.hidden << ",\"heads\":" << c.heads
           << ",\"seq_len\":" << c.seq_len << ",\"vocab\":" << c.vocab
           << ",\"global_batch\":" << c.global_batch << ",\"steps\":" << c.steps
           << ",\"dropout\":" << c.dropout << ",\"optimizer\":\"" << c.optimizer << "\""
           << ",\"precision\":\"" << c.precision << "\"";
  manifest.precision(17);
  // Fine-tuning (0: off); "trainable" at the end names the parameters that train.
  manifest << ",\"lora_rank\":" << c.lora_rank << ",\"lora_alpha\":" << c.lora_alpha
           << ",\"prompt_tuning\":" << c.prompt_tuning << ",\"lora_targets\":[";
  for (size_t i = 0; i < c.lora_targets.size(); ++i) {
    manifest << (i ? "," : "") << "\"" << c.lora_targets[i] << "\"";
  }
  manifest << "]";
  // As Trainer's schedule resolves the defaults (trainer.cpp, scheduleConfig).
  manifest << ",\"lr\":" << c.lr << ",\"min_lr\":" << (c.min_lr >= 0 ? c.min_lr : c.lr / 10)
           << ",\"warmup\":" << (c.warmup >= 0 ? c.warmup : c.steps / 10)
           << ",\"decay_steps\":" << (c.lr_decay_steps >= 0 ? c.lr_decay_steps : c.steps)
           << ",\"weight_decay\":" << c.weight_decay << ",\"beta1\":" << c.beta1
           << ",\"beta2\":" << c.beta2 << ",\"eps\":" << c.eps << ",\"clip_grad\":" << c.clip_grad
           << ",\"params\":[";
  int64_t offset = 0;
  bool first = true;
  std::string trainable;
  for (const auto& [name, tensor] : trainer.heldTensors()) {
    if (name.rfind("param.", 0) != 0) continue;
    at::Tensor t = tensor.detach().to(at::kCPU, at::kFloat).contiguous();
    params.write(reinterpret_cast<const char*>(t.data_ptr<float>()),
                 std::streamsize(t.numel() * sizeof(float)));
    manifest << (first ? "" : ",") << "{\"name\":\"" << name.substr(6) << "\",\"offset\":" << offset
             << ",\"shape\":[";
    for (int64_t d = 0; d < t.dim(); ++d) manifest << (d ? "," : "") << t.size(d);
    manifest << "]}";
    if (tensor.requires_grad())
      trainable += std::string(trainable.empty() ? "" : ",") + "\"" + name.substr(6) + "\"";
    offset += t.numel();
    first = false;
  }
  manifest << "],\"trainable\":[" << trainable << "]}\n";
  const gpttrain::TokenSource source =
      c.data == "synthetic"
          ? gpttrain::TokenSource::synthetic(c.vocab, uint64_t(c.seed))
          : gpttrain::TokenSource::fromFile(c.data, c.val_fraction, c.seq_len, uint64_t(c.seed));
  std::ofstream tokens(dir / "tokens.bin", std::ios::binary);
  std::vector<int64_t> sample(size_t(c.seq_len) + 1);
  // One process: sample b of step k is sample k * G + b (data.h, sampleIndex with DP 1).
  for (int step = 0; step < c.steps; ++step) {
    for (int b = 0; b < c.global_batch; ++b) {
      source.sample(gpttrain::Split::kTrain, uint64_t(step) * c.global_batch + b, c.seq_len,
                    sample.data());
      tokens.write(reinterpret_cast<const char*>(sample.data()),
                   std::streamsize(sample.size() * sizeof(int64_t)));
    }
  }
  if (!params || !manifest || !tokens) {
    throw std::runtime_error("cannot write --dump-init directory '" + c.dump_init + "'");
  }
}

}  // namespace

int main(int argc, char** argv) {
  keepFreedMemoryMapped();
  gpttrain::TrainConfig config;
  if (auto code = gpttrain::parseArgs(argc, argv, config)) return *code;
  gpttrain::LaunchEnv env;
  try {
    env = gpttrain::readLaunchEnv();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpttrain: error: %s\n", e.what());
    return 2;
  }
  if (std::string problem = gpttrain::layoutError(config, env.world); !problem.empty()) {
    std::fprintf(stderr, "gpttrain: error: %s\n", problem.c_str());
    return 2;
  }
  if (std::string problem = gpttrain::backendError(config.backend); !problem.empty()) {
    std::fprintf(stderr, "gpttrain: %s\n", problem.c_str());
    return 2;
  }
  if (std::string problem = gpttrain::deviceError(config.deviceType(), config.backend, env);
      !problem.empty()) {
    std::fprintf(stderr, "gpttrain: %s\n", problem.c_str());
    return 2;
  }
  // CUDA: device LOCAL_RANK is current for the rank's lifetime (NCCL communicators, streams and
  // allocations made without an explicit device use it).
  const torch::Device device = gpttrain::rankDevice(config.deviceType(), env);
  std::optional<c10::DeviceGuard> device_guard;
  if (device.is_cuda()) device_guard.emplace(device);
  // TF32 for fp32 GEMMs, as torch.backends.cuda.matmul.allow_tf32 = True (the CPU ignores it).
  if (config.tf32) at::globalContext().setFloat32MatmulPrecision("high");
  const auto backend =
      config.backend == "nccl" ? gpttrain::CommBackend::kNccl : gpttrain::CommBackend::kGloo;
  if (config.threads > 0) {
    pinThreads(config.threads);
  } else if (env.local_world > 1) {
    pinThreads(1);  // ranks share this machine
  }
  try {
    gpttrain::ProcessGroups groups = gpttrain::makeProcessGroups(
        env, config.tp, config.pp, backend, config.schedule == gpttrain::ScheduleKind::kChimera);
    std::unique_ptr<gpttrain::Trainer> trainer;
    try {
      trainer = std::make_unique<gpttrain::Trainer>(config, groups, device);
    } catch (const std::runtime_error& e) {
      std::fprintf(stderr, "gpttrain: error: %s\n", e.what());
      return 2;
    }
    if (!config.dump_init.empty()) {
      try {
        dumpInit(config, *trainer);
      } catch (const std::runtime_error& e) {
        std::fprintf(stderr, "gpttrain: error: %s\n", e.what());
        return 2;
      }
    }
    return trainer->run();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gpttrain: rank %d: %s\n", env.rank, e.what());
    return 1;
  }
}
