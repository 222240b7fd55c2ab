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
  int parent = -1;              // index into ModelTree::modules; -1 for a top-level module
  int depth = 0;                // 0 for a top-level module
  std::string path;             // "layer1.0.conv1"
  std::string type;             // "Conv2d"
  int64_t params_local = -1;    // on its rank; -1 when not recorded
  int64_t params_logical = -1;  // the whole module over all TP shards; -1 when unknown
  int shard = -1;               // TP shard index on its rank, -1 when not sharded
  int tp_shards = 1;            // distinct TP shards seen for this module over the ranks read
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

struct ModelTree {
  std::vector<ModuleNode> modules;  // a parent comes before its children
  std::vector<int> roots;           // top-level modules in order
  std::vector<int> ranks;           // ranks whose module scopes were read
  int stages = 0;                   // distinct pipeline stages seen (0: no stage arguments)
  int dp = -1;                      // data-parallel size from the grad_sync phase; -1 unknown
  int64_t skipped_backward = 0;     // module scopes skipped inside backward / recomputation

  // Sums over the top-level modules (-1 entries count as 0).
  int64_t logicalParams() const;
  int64_t localParams() const;
};

// Throws TraceError when `options.rank` names no rank of the trace. An empty tree (no module
// scopes) is returned as such: the caller says so.
ModelTree buildModelTree(const TraceReader& reader, const ModelOptions& options = {});

// Splits the children of `parent` (-1: the top-level modules) into runs of consecutive modules
// with the same structure — type, parameter counts, TP split, stage and chunk, shapes, and
// recursively their children's names (relative to their parent), types and structures — each run
// in order; a module alike to no neighbour is a run of one. The ZeRO unit index and the path
// itself do not take part (layers.3 and layers.4 are alike).
std::vector<std::vector<int>> identicalRuns(const ModelTree& tree, int parent);

// The path of `child` relative to its parent's ("layer1.0.conv1" under "layer1.0" -> "conv1").
std::string relativePath(const ModelTree& tree, int child);

}  // namespace tracerun::trace::analysis
