// The factory of data-parallel strategies and the interface's shared defaults (see dp_strategy.h).
// Each strategy lives in its own file; nothing here branches on what a strategy does.
#include "data_parallel/dp_strategy.h"

#include <stdexcept>

namespace gpttrain {

NamedTensors DataParallelStrategy::checkpointParameters() {
  NamedTensors tensors;
  for (auto& e : params().entries()) tensors.emplace_back("param." + e.name, e.tensor);
  return tensors;
}

void DataParallelStrategy::noShards(const char* what) const {
  throw std::logic_error(std::string(what) + ": ZeRO stage " + std::to_string(zeroStage()) +
                         " keeps no shards (use a replicated optimizer)");
}

int64_t ReplicatedStrategy::parameterBytes() const {
  int64_t bytes = 0;
  for (const GradBucket& b : buckets_.all()) bytes += b.numel * int64_t(b.flat.element_size());
  return bytes;
}

NamedTensors ReplicatedStrategy::bufferTensors() const {
  NamedTensors out;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    out.emplace_back("bucket." + std::to_string(i) + ".flat", buckets_[i].flat);
  }
  return out;
}

std::unique_ptr<DataParallelStrategy> makeDataParallelStrategy(ParamSet& params, GroupPtr dp,
                                                               const DataParallelOptions& options) {
  if (options.algorithm != "allreduce" && options.zero_stage != 0) {
    throw std::invalid_argument("--dp-algorithm " + options.algorithm + " needs --zero 0");
  }
  if (options.algorithm == "bytegrad") {
    return makeByteGrad(params, std::move(dp), options.bucket_bytes);
  }
  if (options.algorithm == "decentralized") {
    return makeDecentralized(params, std::move(dp), options.bucket_bytes);
  }
  if (options.algorithm != "allreduce") {
    throw std::invalid_argument("--dp-algorithm " + options.algorithm + ": no such algorithm");
  }
  switch (options.zero_stage) {
    case 0:
      return makePlainDdp(params, std::move(dp), options.bucket_bytes);
    case 1:
      return makeZero1(params, std::move(dp), options.bucket_bytes);
    case 2:
      return makeZero2(params, std::move(dp), options.bucket_bytes);
    case 3:
      return makeZero3(params, std::move(dp), options.bucket_bytes);
    default:
      throw std::invalid_argument("--zero " + std::to_string(options.zero_stage) +
                                  ": no such ZeRO stage (use 0, 1, 2 or 3)");
  }
}

}  // namespace gpttrain
