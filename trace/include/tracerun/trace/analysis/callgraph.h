// Call graph: the tree of scopes and ops by name path (root > step > forward > layers.0 >
// aten::linear > ...), per rank or merged over ranks, with count, inclusive and exclusive time and
// bytes allocated under each node, and the forward -> backward (and other) flows between nodes.
// Reads through TraceReader only, streaming each track once; never renders (dot/ and viewer/ do).
//
// Rules: a span's parent is the enclosing span on its track at depth - 1 (docs/trace-format.md);
// a node is identified by its parent node, name and category, so threads and ranks with the same
// structure merge. Exclusive time subtracts children on the same track (as `aggregates` does).
// An allocation belongs to the innermost open span on a thread of its rank whose name is the op
// the capture recorded with it (or, without an op, its user scope); others are unattributed.
// With `step`, only spans lying wholly inside that step's "step" phase span (per rank; the span's
// `step` argument, else its ordinal from 1) count, with the allocations and flows of that window.
// Each node also carries the pipeline stage and chunk of the forward/backward phase it ran under
// (their `stage` and `chunk` arguments), so pictures never fold layers of two stages together,
// and, for communication spans, the bytes (`bytes` argument) and the group (the span's detail).
// With `gpu_time` (tracedot callgraph --time gpu), GPU kernels, copies and sets (the activities
// gpu.h reads, on "cuda:D stream S" tracks) become children of the op that launched them (its
// op -> kernel flow), or of the root when no flow names one, and every time is GPU time: an
// activity node's exclusive and inclusive time is its duration, an op or scope node's exclusive
// time 0 and its inclusive time the GPU time of the activities launched under it (summed, not
// a union). Op -> kernel flows then become these parent links, not CallLinks.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct CallGraphOptions {
  int rank = -1;                 // -1: merge every rank
  bool attribute_memory = true;  // false: skip the memory pass (bytes stay 0)
  int step = -1;                 // >= 0: only that step (see above)
  bool gpu_time = false;         // weigh by GPU time, kernels under their ops (see above)
};

inline constexpr int kNoStage = -1;        // CallNode::stage/chunk: never under a staged phase
inline constexpr int kSeveralStages = -2;  // spans of different stages (or chunks) merged here

struct CallNode {
  int parent = -1;  // -1 for the root (node 0, a synthetic "all" node)
  core::StringId name = 0;
  core::Category category = core::Category::kOther;
  int depth = -1;  // 0 for top-level spans
  int64_t count = 0;
  int64_t inclusive_ns = 0, exclusive_ns = 0;
  int64_t alloc_bytes = 0, alloc_count = 0;  // allocated directly under this node (not children)
  std::vector<int> children;                 // in first-seen order
  int stage = kNoStage, chunk = kNoStage;    // of the enclosing forward/backward phase
  int64_t comm_bytes = 0;                    // communication spans: sum of their `bytes` arguments
  core::StringId group = 0;     // communication spans: the group (detail) of the first one
  bool several_groups = false;  // ... and whether others named another group
};

// Flows between nodes, counted: e.g. aten::addmm -> AddmmBackward0 (forward_backward).
struct CallLink {
  int from = 0, to = 0;
  core::FlowKind kind = core::FlowKind::kOther;
  int64_t count = 0;
};

struct CallGraph {
  std::vector<CallNode> nodes;  // nodes[0] is the root; a parent comes before its children
  std::vector<CallLink> links;
  int64_t unattributed_bytes = 0, unattributed_allocs = 0;
  int64_t unresolved_flows = 0;  // flows whose ends name no span in the graph
  // With options.gpu_time: the GPU activities placed, and those of them no op launched (placed
  // under the root).
  int64_t gpu_activities = 0, gpu_without_op = 0;
  // With options.step >= 0: every step number found on the chosen ranks (ascending), and whether
  // the one asked for was among them (when not, the graph holds only the root).
  std::vector<int> steps;
  bool step_found = false;

  // "step > forward > aten::linear" (names from the reader that built the graph).
  std::string path(int node, const TraceReader& reader, const std::string& sep = " > ") const;
  // Inclusive bytes: the node's and all its descendants' allocations.
  int64_t subtreeBytes(int node) const;
};

CallGraph buildCallGraph(const TraceReader& reader, const CallGraphOptions& options = {});

}  // namespace tracerun::trace::analysis
