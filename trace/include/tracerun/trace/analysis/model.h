// Model tree: the module hierarchy recorded by module scopes (trainer/'s tracerun::ModuleScope,
// Python nn.Module hooks), per rank or over the whole job, with each module's type, parameter
// counts (on its rank and logical, over all TP shards), input/output shapes, pipeline stage and
// chunk, TP split and ZeRO-3 unit; and the runs of identical consecutive modules a diagram folds.
// Reads through TraceReader only; never renders (dot/ and viewer/ do).
//
// Rules (docs/tracedot.md, "model"):
// - A module scope's parent module is the innermost enclosing module scope on its track. Module
//   scopes inside a backward span or a "backward"/"recompute_forward" phase (recomputation) are
//   not forward modules and are skipped. Repeated calls (microbatches, steps) of one module — same
//   parent, same path — are one node; `calls` counts them, shapes come from the first call.
// - Stage and chunk come from the innermost enclosing phase with a "stage" (and "chunk") argument.
// - Arguments read: params (on this rank), shard (TP rank, -1 not sharded), logical (over all TP
//   shards; absent: params when not sharded, else unknown), tp_col / tp_row / tp_vocab (how TP
//   splits the module's weight, the value is the weight dimension), zero_unit (ZeRO-3 unit, -1
//   none). Detail: "TYPE" optionally followed by " in=SHAPES", " out=SHAPES" and
//   " global=SHAPES" (the inputs over the TP group, where TP splits them).
// - Over the whole job (rank -1), each module is taken from the lowest rank that ran it (its stage,
//   chunk and path); top-level modules are ordered by virtual stage (chunk * stages + stage), then
//   first call.
// - Dataflow (ModelTree::flow, model_flow.cpp; empty unless the trace has tensor identities, the
//   `tensors` capture word): for the first forward pass of each pipeline stage (and chunk), the
//   module calls and the functional ops between them, joined by the tensors they pass. See
//   ModelFlow.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct ModelOptions {
  int rank = -1;  // -1: the whole job (each module from the lowest rank that ran it)
};

enum class TpSplit : uint8_t { kNone, kColumn, kRow, kVocab };
const char* tpSplitName(TpSplit s) noexcept;  // "", "column", "row", "vocab"

struct ModuleNode {
  int parent = -1;                // index into ModelTree::modules; -1 for a top-level module
  int depth = 0;                  // 0 for a top-level module
  std::string path;               // "layer1.0.conv1"
  std::string type;               // "Conv2d"
  int64_t params_local = -1;      // on its rank; -1 when not recorded
  int64_t params_logical = -1;    // the whole module over all TP shards; -1 when unknown
  int64_t param_bytes = -1;       // bytes of params_local (Python hooks); -1 when not recorded
  int64_t params_trainable = -1;  // fine-tuning: of params_logical, those that train; -1 unsaid
  int shard = -1;                 // TP shard index on its rank, -1 when not sharded
  int tp_shards = 1;              // distinct TP shards seen for this module over the ranks read
  TpSplit tp_split = TpSplit::kNone;
  int tp_dim = -1;              // weight dimension TP splits; -1 with kNone
  int zero_unit = -1;           // ZeRO-3 unit; -1 none
  int stage = -1, chunk = -1;   // pipeline stage and chunk; -1 when no phase said so
  int rank = 0;                 // the rank it was read from
  std::string inputs, outputs;  // "f32[8,3,32,32]" (';' between tensors); "" when not recorded
  std::string inputs_global;    // the inputs over the TP group where TP splits them; "" otherwise
  int64_t calls = 0, total_ns = 0;  // forward calls read and their summed duration
  std::vector<int> children;        // in first-call order
};

// The dataflow of one forward pass per pipeline stage, from tensor identities (docs/tracedot.md,
// "model"). A pass is a run of top-level forward module calls on one thread under the same parent
// span, ended by a backward span or a top-level module called again; each stage's (and chunk's)
// first pass on the lowest rank that ran it is read, and consecutive stages are joined (stage s's
// output feeds stage s+1's input).
// - Units: a module call without module calls inside (a leaf call) owns every op inside it; an op
//   outside any leaf call and not inside another op is a functional node of its own (kOp),
//   placed in its innermost module call.
// - Edges: an op's input tensor comes from the unit of the latest op that output the same identity
//   and ended before it started; different units give an edge. A tensor produced before the pass
//   is an input of the model when its shape is one of the enclosing top-level call's input shapes
//   and it is not a parameter (an `ag_var` of the rank); a tensor the pass produced and a forward
//   op after the pass consumes (backward spans excluded) is an output (when none is, the unit of
//   the pass's last op feeds the output).
// - Functional nodes on no path from a module call or the input to a module call or the output
//   (dropout masks, a mask buffer sliced) are dropped. Ops that only read their input's shape
//   (empty_like, zeros_like, ...) consume nothing.
struct FlowNode {
  enum class Kind : uint8_t { kInput, kOutput, kCall, kOp };
  Kind kind = Kind::kCall;
  int module = -1;     // kCall: index into ModelTree::modules
  int call = 1;        // kCall: 1-based call number of its path within the pass ("relu (2)")
  int parent = -1;     // the enclosing kCall node, -1 for none (a top-level call or op)
  std::string name;    // kOp: the op's name ("aten::add_"); kInput/kOutput: "input"/"output"
  std::string shapes;  // kOp: its input shapes as recorded
  int64_t span = 0;    // kCall/kOp: the span read (on the rank `rank`)
  int rank = 0;
  std::vector<int> children;  // kCall: calls and ops inside, in start order
};

struct FlowEdge {
  int from = 0, to = 0;  // indices into ModelFlow::nodes
  std::string shape;     // the tensor's dtype and dims as the consumer received it ("f32[8,64]")
};

struct ModelFlow {
  std::vector<FlowNode> nodes;  // [0] the input, [1] the output, then calls and ops
  std::vector<int> roots;       // top-level calls and ops, stage by stage, in start order
  std::vector<FlowEdge> edges;  // between units (leaf calls, ops, input, output); no duplicates
  bool empty() const { return roots.empty(); }
};

struct ModelTree {
  std::vector<ModuleNode> modules;  // a parent comes before its children
  std::vector<int> roots;           // top-level modules in order
  std::vector<int> ranks;           // ranks whose module scopes were read
  int stages = 0;                   // distinct pipeline stages seen (0: no stage arguments)
  int dp = -1;                      // data-parallel size from the grad_sync phase; -1 unknown
  int64_t skipped_backward = 0;     // module scopes skipped inside backward / recomputation
  ModelFlow flow;                   // empty when the trace has no tensor identities

  // Sums over the top-level modules (-1 entries count as 0).
  int64_t logicalParams() const;
  int64_t localParams() const;
  // Fine-tuning: the sum of every module's params_trainable (modules that say it are adapters,
  // prompts, prefixes: none inside another); -1 when no module says it.
  int64_t trainableParams() const;
};

// Throws TraceError when `options.rank` names no rank of the trace. An empty tree (no module
// scopes) is returned as such: the caller says so.
ModelTree buildModelTree(const TraceReader& reader, const ModelOptions& options = {});

// The dataflow of `tree` (its modules and ranks as buildModelTree made them); buildModelTree calls
// it. Empty when the trace holds no tensor identities.
ModelFlow buildModelFlow(const TraceReader& reader, const ModelTree& tree);

// Splits the children of `parent` (-1: the top-level modules) into runs of consecutive modules
// with the same structure — type, parameter counts, TP split, stage and chunk, shapes, and
// recursively their children's names (relative to their parent), types and structures — each run
// in order; a module alike to no neighbour is a run of one. The ZeRO unit index and the path
// itself do not take part (layers.3 and layers.4 are alike).
std::vector<std::vector<int>> identicalRuns(const ModelTree& tree, int parent);

// The path of `child` relative to its parent's ("layer1.0.conv1" under "layer1.0" -> "conv1").
std::string relativePath(const ModelTree& tree, int child);

}  // namespace tracerun::trace::analysis
