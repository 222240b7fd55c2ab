// Chimera's per-rank action lists (Li and Hoefler, SC'21; see chimera.h). Pure integers like
// action_lists.cpp; it does not execute, communicate or know the model.
//
// The order per rank is the one of the authors' runtime (github.com/Shigangli/Chimera,
// _call_chimera_pipeline): rank r's "primary" chunk is the one whose stage is in the first half of
// its pipeline (down on ranks < p/2, up on the others). With h = p/2, a = |h - r| (+1 on the second
// half) and b = h - a, each unit of p microbatches runs
//   a x F(prim)   (the first unit) or a x [B(prim) F(prim)] (later units: the previous unit's tail)
//   b x [F(sec) F(prim)]   a x [F(sec) B(sec)]   b x [B(prim) B(sec)]
// and the step ends with a x B(prim). Forwards and backwards of one chunk run in microbatch order.
#include "tracerun/schedule/chimera.h"

#include <stdexcept>

namespace tracerun::schedule {
namespace {

// The k-th microbatch (k in [0, m/2)) of pipeline `chunk`: in unit k / h, the first h microbatches
// go down, the next h up.
int pipelineMicrobatch(int stages, int chunk, int k) {
  const int h = stages / 2;
  return (k / h) * stages + k % h + (chunk == 1 ? h : 0);
}

// Tag of the message leaving (chunk, stage) for `microbatch`; unique within a step.
int chimeraTag(bool forward, int chunk, int stage, int microbatch, const PipelineShape& s) {
  return ((chunk * s.stages + stage) * s.microbatches + microbatch) * 2 + (forward ? 0 : 1);
}

std::vector<Action> withChimeraMessages(const std::vector<Action>& order, const PipelineShape& s,
                                        int rank) {
  const int p = s.stages;
  std::vector<Action> out;
  for (const Action& a : order) {
    const int stage = chimeraStage(p, rank, a.chunk), mb = a.microbatch, c = a.chunk;
    if (a.kind == ActionKind::kForward) {
      if (stage > 0) {
        out.push_back(Action{ActionKind::kRecvForward, mb, c, chimeraRank(p, c, stage - 1),
                             chimeraTag(true, c, stage - 1, mb, s)});
      }
      out.push_back(a);
      if (stage < p - 1) {
        out.push_back(Action{ActionKind::kSendForward, mb, c, chimeraRank(p, c, stage + 1),
                             chimeraTag(true, c, stage, mb, s)});
      }
    } else {
      if (stage < p - 1) {
        out.push_back(Action{ActionKind::kRecvBackward, mb, c, chimeraRank(p, c, stage + 1),
                             chimeraTag(false, c, stage + 1, mb, s)});
      }
      out.push_back(a);
      if (stage > 0) {
        out.push_back(Action{ActionKind::kSendBackward, mb, c, chimeraRank(p, c, stage - 1),
                             chimeraTag(false, c, stage, mb, s)});
      }
    }
  }
  return out;
}

}  // namespace

int chimeraStage(int stages, int rank, int chunk) {
  return chunk == 0 ? rank : stages - 1 - rank;
}

int chimeraChunk(int stages, int microbatch) {
  return microbatch % stages < stages / 2 ? 0 : 1;
}

int chimeraRank(int stages, int chunk, int stage) {
  return chunk == 0 ? stage : stages - 1 - stage;
}

std::vector<Action> chimeraComputeOrder(const PipelineShape& s, int rank) {
  const int p = s.stages, h = p / 2;
  if (p < 2 || p % 2 != 0 || s.microbatches % p != 0) {
    throw std::invalid_argument("chimera needs an even pipeline and m a multiple of it");
  }
  const bool first_half = rank < h;
  const int a = first_half ? h - rank : rank - h + 1;
  const int b = h - a;
  const int prim = first_half ? 0 : 1, sec = 1 - prim;
  int forwards[2] = {0, 0}, backwards[2] = {0, 0};
  std::vector<Action> out;
  auto push = [&](ActionKind kind, int chunk) {
    int& k = kind == ActionKind::kForward ? forwards[chunk] : backwards[chunk];
    out.push_back(Action{kind, pipelineMicrobatch(p, chunk, k++), chunk, -1, -1});
  };
  const auto F = ActionKind::kForward, B = ActionKind::kBackward;
  for (int unit = 0; unit < s.microbatches / p; ++unit) {
    for (int i = 0; i < a; ++i) {
      if (unit > 0) push(B, prim);
      push(F, prim);
    }
    for (int i = 0; i < b; ++i) {
      push(F, sec);
      push(F, prim);
    }
    for (int i = 0; i < a; ++i) {
      push(F, sec);
      push(B, sec);
    }
    for (int i = 0; i < b; ++i) {
      push(B, prim);
      push(B, sec);
    }
  }
  for (int i = 0; i < a; ++i) push(B, prim);
  return out;
}

std::vector<Action> buildChimeraSchedule(const PipelineShape& s, int rank) {
  return withChimeraMessages(chimeraComputeOrder(s, rank), s, rank);
}

std::vector<Action> buildChimeraForwardOnlySchedule(const PipelineShape& s, int rank) {
  std::vector<Action> order;
  for (int mb = 0; mb < s.microbatches; ++mb) {
    order.push_back(Action{ActionKind::kForward, mb, chimeraChunk(s.stages, mb), -1, -1});
  }
  return withChimeraMessages(order, s, rank);
}

}  // namespace tracerun::schedule
