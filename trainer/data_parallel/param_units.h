// The interface a transformer layer calls around its forward and its recomputed backward when its
// parameters are sharded over data-parallel ranks (ZeRO-3): one unit per layer. The model knows
// only this interface; the ZeRO-3 strategy (dp_zero3.cpp) implements it. No collectives are
// chosen here.
#pragma once

namespace gpttrain {

class ParamUnits {
 public:
  virtual ~ParamUnits() = default;
  // Before the layer's forward and before its re-run in backward: its full parameters are there
  // (all-gathered, or waited for when prefetched); the next unit's gather may start.
  virtual void gather(int layer, bool backward) = 0;
  // After the forward: the full parameters are freed (only this rank's shard stays).
  virtual void release(int layer) = 0;
  // After the layer's backward: its gradients are reduce-scattered into this rank's shard (summed
  // over microbatches), then full gradients and parameters are freed.
  virtual void reduceGrads(int layer) = 0;
};

}  // namespace gpttrain
