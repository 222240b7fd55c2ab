// Action kinds (see action.h): their trace words and classes; no lists, no timing.
#include "tracerun/schedule/action.h"

#include <tracerun/core/vocabulary.h>

namespace tracerun::schedule {

const char* actionName(ActionKind kind) {
  switch (kind) {
    case ActionKind::kRecvForward:
      return vocab::scope::kRecvForward;
    case ActionKind::kForward:
      return vocab::phase::kForward;
    case ActionKind::kSendForward:
      return vocab::scope::kSendForward;
    case ActionKind::kRecvBackward:
      return vocab::scope::kRecvBackward;
    case ActionKind::kBackward:
      return vocab::phase::kBackward;
    case ActionKind::kSendBackward:
      return vocab::scope::kSendBackward;
    case ActionKind::kBackwardInput:
      return vocab::phase::kBackwardInput;
    case ActionKind::kBackwardWeight:
      return vocab::phase::kBackwardWeight;
    case ActionKind::kApplyUpdate:
      return vocab::phase::kOptimizer;
  }
  return "?";
}

bool isCompute(ActionKind k) {
  return k == ActionKind::kForward || k == ActionKind::kBackward ||
         k == ActionKind::kBackwardInput || k == ActionKind::kBackwardWeight;
}

bool isReceive(ActionKind k) {
  return k == ActionKind::kRecvForward || k == ActionKind::kRecvBackward;
}

bool isSend(ActionKind k) {
  return k == ActionKind::kSendForward || k == ActionKind::kSendBackward;
}

}  // namespace tracerun::schedule
