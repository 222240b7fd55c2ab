// Autograd graph: the backward nodes one step of one rank executed, the edges between them (each
// node's next_edges, recorded by the capture as span arguments ag_node / ag_next / ag_var:
// docs/capture.md "Autograd graph"), the forward op that made each node and the module scopes it
// ran under, and which nodes belong to recomputed regions. Reads through TraceReader only; never
// renders (dot/ does). No recursion anywhere: a 20,000-node chain is a loop like any other graph.
//
// Rules:
// - The step is a "step" phase (or user) span of the rank, numbered by its `step` argument (else
//   1, 2, ... in start order); without any step span, the whole trace is one step (number -1).
// - A node's identity is the node's address, unique while its graph lives; an address reused by a
//   later node is told apart by time: an edge leads to the first node with the target address that
//   starts at or after its source (a target always runs after its source).
// - The forward op is the source of the node's forward_backward flow; its modules are the module
//   spans enclosing it on its track, outermost first. An AccumulateGrad node takes the modules of
//   the first node that feeds it; a node of a C++ custom function (whose sequence number no op
//   carries) the outer scopes its first feeder shares with its first next node that has a
//   forward op (the feeder's when it has none).
// - Recomputed: the forward op ran inside a "recompute_forward" phase (gpttrain --recompute), or
//   the node ran inside another node (a reentrant backward, as torch.utils.checkpoint's).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/core/records.h"
#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct AutogradOptions {
  int rank = 0;
  int step = -1;  // -1: the first step that ran backward nodes
};

struct AutogradNode {
  int64_t span = 0;  // spans.id of the node's backward span
  int64_t track = 0, start_ns = 0, dur_ns = 0;
  core::StringId name = 0;  // "AddmmBackward0", "torch::autograd::AccumulateGrad"
  int64_t seq = -1;         // autograd sequence number (-1 for AccumulateGrad)
  int64_t identity = 0;     // ag_node
  // AccumulateGrad: the parameter's dtype and dims ("f32[4,3]") and its data address (ag_var).
  core::StringId shape = 0;
  int64_t variable = 0;
  bool accumulate_grad = false;
  // The forward op that made the node (0 / empty when the trace has none: no flow).
  int64_t forward_span = 0;
  core::StringId forward_name = 0, forward_detail = 0;
  std::vector<core::StringId>
      modules;  // module scopes of the forward op (or feeder), outermost first
  bool recomputed = false;
  int pass = 0;  // which backward pass of the step (0, 1, ... by the start of its root)
};

struct AutogradEdge {
  int from = 0, to = 0;  // indices into AutogradGraph::nodes: a node -> one of its next nodes
  int output_nr = 0;     // position in the source's next_edges
  int input_nr = 0;      // which input of the target
};

struct AutogradGraph {
  int rank = 0;
  int step = -1;
  int64_t start_ns = 0, end_ns = 0;  // the step's window
  std::vector<AutogradNode> nodes;   // in start order (ties: track, then span id)
  std::vector<AutogradEdge> edges;   // by source node, then output_nr
  int passes = 0;                    // backward passes (roots) in the step
  // Edges whose target did not run in the step (e.g. filtered by torch.autograd.grad's inputs),
  // and nodes recorded without their graph arguments (an old trace, or a node run outside the
  // engine): neither is drawn.
  int64_t unresolved_edges = 0, nodes_without_edges = 0;
  // Steps of the rank (their numbers), for error messages and --step choices.
  std::vector<int> steps;
};

// Throws TraceError (one line naming the file) when the rank has no backward nodes in the step,
// the step does not exist, or no node carries graph arguments.
AutogradGraph buildAutogradGraph(const TraceReader& reader, const AutogradOptions& options = {});

}  // namespace tracerun::trace::analysis
