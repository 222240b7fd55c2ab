// A rank program for the decentralized-SGD test (test_bagua.cpp runs it as 2 or 4 ranks): every
// DP rank builds the same small parameter set from its own seed (so the replicas differ), runs
// decentralized SGD's weight exchange of step `step` (the strategy's afterOptimizerStep: an
// update at learning rate 0 changes nothing) and checks each weight against (own + peer's) / 2,
// the peer's weights rebuilt here from the peer's seed, and the peer against the pairing rule
// written out independently. Prints each mismatch; exit code 0 only when everything matched.
#include "data_parallel/dp_strategy.h"
#include "parallel/process_groups.h"

#include <cstdio>
#include <cstdlib>

using namespace gpttrain;

namespace {

ParamSet rankParams(int rank) {
  ParamSet params(uint64_t(1000 + rank), 0, 1, torch::Device(torch::kCPU));
  params.add(kTiedEmbeddingName, {10, 4}, -1, Init::kNormal, 0.5);
  params.add("layers.0.fc.weight", {4, 5}, -1, Init::kNormal, 0.5);
  params.add("layers.0.fc.bias", {5}, -1, Init::kNormal, 0.5);
  params.add("final_norm.weight", {4}, -1, Init::kNormal, 0.5);
  return params;
}

}  // namespace

int main(int argc, char** argv) {
  const int step = argc > 1 ? std::atoi(argv[1]) : 1;
  LaunchEnv env = readLaunchEnv();
  ProcessGroups groups = makeProcessGroups(env, 1, 1);
  const int n = groups.dp->size, rank = groups.dp->rank;
  // Bagua's "shift one", written out: the lower half meets the upper half, shifted by the step.
  const int half = n / 2;
  const int want_peer =
      rank < half ? half + (step + rank) % half : ((rank - half - step) % half + half) % half;
  int failures = 0;
  if (decentralizedPeer(rank, n, step) != want_peer) {
    std::fprintf(stderr, "rank %d MISMATCH peer %d, want %d\n", rank,
                 decentralizedPeer(rank, n, step), want_peer);
    ++failures;
  }
  ParamSet params = rankParams(rank);
  ParamSet peer = rankParams(want_peer);
  auto strategy =
      makeDataParallelStrategy(params, groups.dp, DataParallelOptions{0, 64, "decentralized"});
  strategy->beginStep();
  strategy->finish();
  strategy->afterOptimizerStep(step);
  ParamSet initial = rankParams(rank);
  for (size_t i = 0; i < params.entries().size(); ++i) {
    const at::Tensor want =
        (initial.entries()[i].tensor.detach() + peer.entries()[i].tensor.detach()) * 0.5;
    const at::Tensor got = params.entries()[i].tensor.detach();
    if (!at::equal(got, want)) {  // the same float operations: exact
      std::fprintf(stderr, "rank %d MISMATCH %s: max |got - want| %g\n", rank,
                   params.entries()[i].name.c_str(), (got - want).abs().max().item<double>());
      ++failures;
    }
    if (at::equal(got, initial.entries()[i].tensor.detach())) {
      std::fprintf(stderr, "rank %d MISMATCH %s: unchanged\n", rank,
                   params.entries()[i].name.c_str());
      ++failures;
    }
  }
  std::printf("decentralized_check: rank %d peer %d failures %d\n", rank, want_peer, failures);
  return failures == 0 ? 0 : 1;
}
