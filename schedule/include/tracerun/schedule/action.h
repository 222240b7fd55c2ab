// One action of a pipeline rank's step: forward / backward of a microbatch on a model chunk, or a
// send or receive around them. Pure integers: no tensors, no communication, no clocks.
#pragma once

namespace tracerun::schedule {

enum class ActionKind {
  kRecvForward,   // receive the activation this forward consumes from the previous virtual stage
  kForward,       // run the chunk's forward of the microbatch
  kSendForward,   // send its output activation to the next virtual stage (non-blocking)
  kRecvBackward,  // receive the gradient of that output from the next virtual stage
  kBackward,      // run the chunk's backward of the microbatch
  kSendBackward,  // send the gradient of its input to the previous virtual stage (non-blocking)
  // Split backward (zb-h1): B, the gradient of the input only (received gradient in, sent on at
  // once, like kBackward), and later W, the gradient of the weights (no messages).
  kBackwardInput,
  kBackwardWeight,
  kApplyUpdate,  // 2bw: form the next weight version from batch `microbatch`'s gradient
};

// The action's trace word (tracerun/core/vocabulary.h): "forward", "recv_forward", ...
const char* actionName(ActionKind kind);

bool isCompute(ActionKind kind);  // forward, backward, B or W
bool isReceive(ActionKind kind);
bool isSend(ActionKind kind);

struct Action {
  ActionKind kind = ActionKind::kForward;
  int microbatch = 0;
  int chunk = 0;  // model chunk on this rank
  int peer = -1;  // pipeline rank sent to / received from; -1 for compute
  int tag = -1;   // message tag, equal on sender and receiver; -1 for compute
  bool operator==(const Action& o) const {
    return kind == o.kind && microbatch == o.microbatch && chunk == o.chunk && peer == o.peer &&
           tag == o.tag;
  }
};

}  // namespace tracerun::schedule
