// The real forward and backward of one rank's model chunks for the pipeline executor: each
// microbatch's samples (first and last virtual stage), dropout, bf16 autocast, the loss scaled by
// 1/M into backward, and the sum of the last stage's losses. It does not schedule or communicate.
#pragma once

#include "config.h"
#include "data/data.h"
#include "data_parallel/dp_strategy.h"
#include "model/model.h"
#include "pipeline/pipeline_executor.h"
#include "pipeline/split_backward.h"

#include <map>
#include <memory>
#include <utility>
#include <vector>

namespace gpttrain {

class ModelCompute : public PipelineCompute {
 public:
  // `batch_index`: the global batch (step - 1 when training, the evaluation iteration otherwise).
  // rng null: evaluation (no dropout, no backward). All references must outlive this object.
  ModelCompute(std::vector<GptStage>& chunks, const TrainConfig& config, const TokenSource& source,
               Split split, uint64_t batch_index, int dp_rank, int microbatches, DropoutRng* rng,
               DataParallelStrategy* dp);

  at::Tensor forward(int chunk, int microbatch, const at::Tensor& input) override;
  at::Tensor backward(int chunk, int microbatch, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override;
  // zb-h1: B is the stage input's gradient (graph retained; on the first stage, the embedded
  // input's, not sent), keeping the gradients that reach the nodes where the weights' paths part
  // (split_backward.h); W runs only the weights' paths from them, where the data-parallel hooks
  // fire.
  at::Tensor backwardInput(int chunk, int microbatch, const at::Tensor& input,
                           const at::Tensor& output, const at::Tensor& grad) override;
  void backwardWeight(int chunk, int microbatch, const at::Tensor& input, const at::Tensor& output,
                      const at::Tensor& grad) override;

  // Sum of the losses the last virtual stage computed (0 on other ranks), in double. Read from the
  // device when asked, after the step's backward: reading each loss at its forward (.item()) made
  // the host wait for the forward on a GPU before it could launch the backward.
  double lossSum() const;

 private:
  std::vector<GptStage>& chunks_;
  const TrainConfig& config_;
  const TokenSource& source_;
  Split split_;
  uint64_t batch_index_;
  int dp_rank_;
  int microbatches_;
  DropoutRng* rng_;
  DataParallelStrategy* dp_;
  at::Tensor loss_sum_;  // double, on the last stage's device; undefined before the first loss
  // zb-h1: each microbatch's split backward between its B and its W, by (chunk, microbatch).
  std::map<std::pair<int, int>, std::unique_ptr<SplitBackward>> splits_;
  // zb-h1, first stage: each microbatch's embedded input from its forward to its B.
  std::map<std::pair<int, int>, at::Tensor> embedded_;

  void markLastMicrobatch(int chunk, int microbatch);
};

}  // namespace gpttrain
