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
};

struct CallNode {
  int parent = -1;  // -1 for the root (node 0, a synthetic "all" node)
  core::StringId name = 0;
  core::Category category = core::Category::kOther;
  int depth = -1;  // 0 for top-level spans
  int64_t count = 0;
  int64_t inclusive_ns = 0, exclusive_ns = 0;
  int64_t alloc_bytes = 0, alloc_count = 0;  // allocated directly under this node (not children)
  std::vector<int> children;                 // in first-seen order
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

  // "step > forward > aten::linear" (names from the reader that built the graph).
  std::string path(int node, const TraceReader& reader, const std::string& sep = " > ") const;
  // Inclusive bytes: the node's and all its descendants' allocations.
  int64_t subtreeBytes(int node) const;
};

CallGraph buildCallGraph(const TraceReader& reader, const CallGraphOptions& options = {});

}  // namespace tracerun::trace::analysis
