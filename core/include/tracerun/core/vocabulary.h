// The annotation vocabulary: every phase, scope, module, argument and counter name that one part
// of tracerun writes and another reads (trainer/ and the capture write them; trace/'s analyses
// and the launcher's status line read them). One spelling each, so a rename breaks the build
// instead of silently emptying an analysis. Names only: no types, no libtorch.
//
// It lives in core/ because both ends must see it and dependencies point down (trace/ never sees
// interpose/); tracerun/annotate.h includes it, so an annotated program (trainer/ included) gets it
// with the annotation API and needs nothing else of ours. Installed as include/tracerun/core/.
//
// Each name is a `const char[]` (one rule beside them: arg::isStringValued): it passes as the
// `const char*` that annotate.h and the C entry points take, and compares with `==` against a
// std::string read back from a trace.
//
// Sections: phases · pipeline messages · data-parallel and ZeRO scopes · collective fallbacks ·
//           modules · arguments · NCCL host calls · counters
#pragma once

#include <string_view>

namespace tracerun::vocab {

// ---- Phases: tracerun::PhaseScope / Step (span category "phase"). The analyses read step,
// forward, backward (pipeline, memory, report) and recompute_forward (memory).
namespace phase {
inline constexpr char kStep[] = "step";          // one training step; argument arg::kStep
inline constexpr char kForward[] = "forward";    // a microbatch's forward on one stage
inline constexpr char kBackward[] = "backward";  // ... and its backward
// zb-h1's split backward: B (gradient of the stage input) and W (gradient of the weights); both
// count as backward compute in the analyses.
inline constexpr char kBackwardInput[] = "backward_input";
inline constexpr char kBackwardWeight[] = "backward_weight";
inline constexpr char kRecomputeForward[] = "recompute_forward";  // a forward re-run in backward
inline constexpr char kGradSync[] = "grad_sync";     // gradient reductions after the last backward
inline constexpr char kOptimizer[] = "optimizer";    // clipping and the update
inline constexpr char kValidation[] = "validation";  // evaluation (outside any step)
// Once at start-up when the model is frozen but for adapters / prompts / prefixes: args frozen
// (frozen parameters on this rank) and params (trainable ones); memory_live.h's closed form.
inline constexpr char kFineTuning[] = "fine_tuning";
// What a user program's optimizer holds, for memory_live.h's closed form: recorded by the Python
// training hooks (interpose/python/_tracerun_training.py, inside the "optimizer" phase of a step,
// when an optimizer's numbers are new) and by tracerun::tagTraining (annotate_training.h, each
// call). A zero-length span; detail: the optimizer's class ("AdamW"; "AdamW #2" for a program's
// second optimizer); args params, param_bytes (over its param groups), states and state_bytes.
inline constexpr char kModelStates[] = "model_states";
// Once at start-up when docs/trainer.md's activation closed form covers the run (gpttrain: one
// pipeline stage, no recomputation, dropout 0, fp32, no fine-tuning): activation_shape with args
// seq_len, micro_batch, hidden, heads; activation_layout with attention (0 standard, 1 flash),
// layers, tp, sp. Read by trace/analysis/activation_form.h.
inline constexpr char kActivationShape[] = "activation_shape";
inline constexpr char kActivationLayout[] = "activation_layout";
}  // namespace phase

// ---- Pipeline messages: user scopes, arguments peer (global rank), bytes, microbatch, chunk.
// The pipeline and communication analyses read the four send/recv names.
namespace scope {
inline constexpr char kRecvForward[] = "recv_forward";
inline constexpr char kSendForward[] = "send_forward";
inline constexpr char kRecvBackward[] = "recv_backward";
inline constexpr char kSendBackward[] = "send_backward";
inline constexpr char kPipelineSendWait[] = "pipeline_send_wait";  // end of a step; arg sends

// ---- Data parallelism and ZeRO: user scopes naming the implementation that ran (for people and
// the communication analysis' "via" column; no analysis matches them).
inline constexpr char kDpBucketAllreduce[] = "dp_bucket_allreduce";
inline constexpr char kDpBucketReduceScatterBase[] =
    "dp_bucket_reduce_scatter[reduce_scatter_base]";
inline constexpr char kDpBucketReduceScatterAllReduce[] =
    "dp_bucket_reduce_scatter[all_reduce+narrow]";
inline constexpr char kDpBucketReduceWait[] = "dp_bucket_reduce_wait";
inline constexpr char kZeroParamAllgather[] = "zero_param_allgather";
inline constexpr char kZero3ReduceScatter[] = "zero3_reduce_scatter[all_reduce+narrow]";
inline constexpr char kZero3GatherStart[] = "zero3_gather_start[all_gather_list+cat]";
inline constexpr char kZero3GatherWait[] = "zero3_gather_wait";
inline constexpr char kZero3ReduceWait[] = "zero3_reduce_wait";

// ---- Collective fallbacks of trainer/parallel/collectives.cpp: op[implementation].
inline constexpr char kAllGatherBase[] = "all_gather[all_gather_base]";
inline constexpr char kAllGatherListCat[] = "all_gather[all_gather_list+cat]";
inline constexpr char kReduceScatterBase[] = "reduce_scatter[reduce_scatter_base]";
inline constexpr char kReduceScatterAllReduce[] = "reduce_scatter[all_reduce+narrow]";
}  // namespace scope

// ---- Modules: tracerun::ModuleScope (span category "module"); the name is a dotted path,
// the detail is the type (optionally followed by " in=SHAPES", " out=SHAPES", " global=SHAPES";
// docs/capture.md). gpttrain's paths: embedding, layers.<i>, layers.<i>.attn(.qkv, .proj),
// layers.<i>.mlp(.fc1, .fc2), head.
namespace module_path {
inline constexpr char kEmbedding[] = "embedding";
inline constexpr char kLayers[] = "layers";  // layers.<i>
inline constexpr char kAttn[] = "attn";      // layers.<i>.attn
inline constexpr char kMlp[] = "mlp";        // layers.<i>.mlp
inline constexpr char kHead[] = "head";
inline constexpr char kQkv[] = "qkv";    // layers.<i>.attn.qkv
inline constexpr char kProj[] = "proj";  // layers.<i>.attn.proj
inline constexpr char kFc1[] = "fc1";    // layers.<i>.mlp.fc1
inline constexpr char kFc2[] = "fc2";    // layers.<i>.mlp.fc2
inline constexpr char kLora[] = "lora";      // <linear path>.lora: a LoRA adapter (issue 32)
inline constexpr char kPrompt[] = "prompt";  // prompt tuning's prepended embeddings
inline constexpr char kPrefix[] = "prefix";  // layers.<i>.attn.prefix: prefix tuning's keys, values
}  // namespace module_path
namespace module_type {
inline constexpr char kVocabParallelEmbedding[] = "VocabParallelEmbedding";
inline constexpr char kTransformerLayer[] = "TransformerLayer";
inline constexpr char kParallelAttention[] = "ParallelAttention";
inline constexpr char kParallelMLP[] = "ParallelMLP";
inline constexpr char kLMHead[] = "LMHead+VocabParallelCrossEntropy";
inline constexpr char kColumnParallelLinear[] = "ColumnParallelLinear";
inline constexpr char kRowParallelLinear[] = "RowParallelLinear";
inline constexpr char kLoraAdapter[] = "LoRA";
inline constexpr char kPromptTuning[] = "PromptTuning";
inline constexpr char kPrefixTuning[] = "PrefixTuning";
}  // namespace module_type

// ---- Argument keys (integers attached to a span).
namespace arg {
// Pipeline (phases and messages); read by the pipeline and communication analyses.
inline constexpr char kStep[] = "step";
inline constexpr char kStage[] = "stage";  // virtual stage of a forward/backward
inline constexpr char kChunk[] = "chunk";
inline constexpr char kMicrobatch[] = "microbatch";
// The rank on the other side of a message: global (the RANK of the attempt that recorded it), or
// for NCCL's calls the rank in the communicator (nccl::kSend).
inline constexpr char kPeer[] = "peer";
inline constexpr char kSends[] = "sends";
// 2bw: the weight version a forward/backward used (V_b for batch b), or an update formed.
inline constexpr char kWeightVersion[] = "weight_version";
// Communication spans (the capture's comm entry point and gpttrain's scopes); the communication
// analysis reads bytes, peer, group_size and tag.
inline constexpr char kBytes[] = "bytes";
inline constexpr char kRoot[] = "root";
inline constexpr char kGroupSize[] = "group_size";
inline constexpr char kGroupRank[] = "group_rank";
// The process group's name as torch.distributed gives it, alike on every rank: the number itself
// for torch's counter names ("0" the world, "1", "2"... in creation order), else the name's
// FNV-1a 64-bit hash with the top two bits cleared (hashed names, split groups). Equal ids on two
// ranks: one group, until the program destroys its world (torch's counter restarts). Absent when
// unknown (C++ programs; the Python hooks give it: interpose/python/_tracerun_groups.py).
inline constexpr char kGroupId[] = "group_id";
inline constexpr char kSeq[] = "seq";
inline constexpr char kDtype[] = "dtype";
inline constexpr char kTag[] = "tag";
// Data parallelism, ZeRO and recomputation (gpttrain).
inline constexpr char kBucket[] = "bucket";
inline constexpr char kUnit[] = "unit";  // a ZeRO-3 parameter unit (a layer)
inline constexpr char kDp[] = "dp";
inline constexpr char kTp[] = "tp";
inline constexpr char kZero[] = "zero";    // ZeRO stage 0-3 (grad_sync, with params: memory_live.h)
inline constexpr char kLayer[] = "layer";  // recompute_forward of a layer
inline constexpr char kAttentionCore[] = "attention_core";  // ... of an attention core
// Modules (tracerun::ModuleScope).
inline constexpr char kParams[] = "params";  // parameter count on this rank (also on grad_sync)
inline constexpr char kShard[] = "shard";    // this rank's shard index, -1 when not sharded
// ... read by the model analysis (trace/analysis/model.h) with params and shard:
inline constexpr char kLogical[] = "logical";         // parameter count over all TP shards
inline constexpr char kParamBytes[] = "param_bytes";  // bytes of its parameters on this rank
inline constexpr char kTpCol[] = "tp_col";        // column-parallel: the weight dimension TP splits
inline constexpr char kTpRow[] = "tp_row";        // row-parallel: likewise
inline constexpr char kTpVocab[] = "tp_vocab";    // vocab-parallel embedding: likewise
inline constexpr char kZeroUnit[] = "zero_unit";  // the module's ZeRO-3 unit, -1 none
// Fine-tuning (LoRA adapters, prompts, prefixes): of the module's logical parameters, those that
// train (the rest of the model is frozen). Absent: the module does not say.
inline constexpr char kTrainable[] = "trainable";
inline constexpr char kFrozen[] = "frozen";  // frozen parameters on this rank (fine_tuning phase)
// The optimizer of a model_states phase (with params and param_bytes): states it keeps per
// parameter (AdamW / Adam 2, 3 with amsgrad; SGD with momentum 1; plain SGD 0; the largest among
// its param groups; -1 unknown: no closed form) and their bytes (sum over its param groups of
// states x numel x the state's element size; -1 when unknown).
inline constexpr char kStates[] = "states";
inline constexpr char kStateBytes[] = "state_bytes";
// The activation closed form's inputs (phases activation_shape and activation_layout).
inline constexpr char kSeqLen[] = "seq_len";
inline constexpr char kMicroBatch[] = "micro_batch";
inline constexpr char kHidden[] = "hidden";
inline constexpr char kHeads[] = "heads";  // the model's, over all TP ranks
inline constexpr char kAttention[] = "attention";  // 0 standard, 1 flash
inline constexpr char kLayers[] = "layers";        // transformer layers on this rank
inline constexpr char kSp[] = "sp";                // 1 with sequence parallelism
// Kernels (the CUDA capture; the span's name is the demangled name, core/kernel_name.h). These
// two are string-valued: the value is a strings.id (isStringValued below).
inline constexpr char kMangledName[] = "mangled_name";  // the symbol as the binary spells it
inline constexpr char kShortName[] = "short_name";      // the base function name (nsys shortName)

// The one rule for string-valued argument keys: args stay integers in the store (args.value);
// for these keys the integer is a strings.id, and every reader that shows arguments (the Chrome
// export, the viewer, the report) shows the string instead of the number.
inline constexpr const char* kStringValued[] = {kMangledName, kShortName};
inline bool isStringValued(std::string_view key) noexcept {
  for (const char* k : kStringValued) {
    if (key == k) return true;
  }
  return false;
}
}  // namespace arg

// ---- NCCL host calls: libtracerun_nccl's span names (category comm, interpose/nccl/). The
// communication analysis counts the collectives and sends/receives among them; a communicator's
// set-up and tear-down and the group markers move no data, so they are listed apart and never
// counted as communication (isControlCall).
namespace nccl {
inline constexpr char kCommInitRank[] = "nccl:CommInitRank";
inline constexpr char kCommInitRankConfig[] = "nccl:CommInitRankConfig";
inline constexpr char kCommSplit[] = "nccl:CommSplit";  // on the parent's track
inline constexpr char kCommDestroy[] = "nccl:CommDestroy";
inline constexpr char kCommAbort[] = "nccl:CommAbort";
inline constexpr char kGroupStart[] = "nccl:GroupStart";
inline constexpr char kGroupEnd[] = "nccl:GroupEnd";
inline constexpr char kAllReduce[] = "nccl:AllReduce";
inline constexpr char kAllGather[] = "nccl:AllGather";
inline constexpr char kReduceScatter[] = "nccl:ReduceScatter";
inline constexpr char kBroadcast[] = "nccl:Broadcast";
inline constexpr char kReduce[] = "nccl:Reduce";
// NCCL 2.28's own all-to-all, gather and scatter (PyTorch on NCCL >= 2.28 calls ncclAlltoAll for
// all_to_all_single with equal splits, where older ones grouped a send and a receive per rank).
inline constexpr char kAlltoAll[] = "nccl:AlltoAll";
inline constexpr char kGather[] = "nccl:Gather";
inline constexpr char kScatter[] = "nccl:Scatter";
// Send and Recv: arg::kPeer is the peer's rank in the communicator (NCCL's own argument), and
// arg::kGroupRank this rank's; the analysis maps both to trace ranks per communicator.
inline constexpr char kSend[] = "nccl:Send";
inline constexpr char kRecv[] = "nccl:Recv";

inline constexpr const char* kControlCalls[] = {kCommInitRank, kCommInitRankConfig, kCommSplit,
                                                kCommDestroy,  kCommAbort,          kGroupStart,
                                                kGroupEnd};
inline bool isControlCall(std::string_view name) noexcept {
  for (const char* k : kControlCalls) {
    if (name == k) return true;
  }
  return false;
}
// The calls that move data; each span is the host call that enqueues the work (the kernel runs
// later on the GPU).
inline constexpr const char* kDataCalls[] = {kAllReduce, kAllGather, kReduceScatter,
                                             kBroadcast, kReduce,    kAlltoAll,
                                             kGather,    kScatter,   kSend,
                                             kRecv};
inline bool isDataCall(std::string_view name) noexcept {
  for (const char* k : kDataCalls) {
    if (name == k) return true;
  }
  return false;
}
}  // namespace nccl

// ---- Counters (tracerun::counter): one counter track per name. The launcher's status line reads
// step, loss and tokens_per_s.
namespace counter {
inline constexpr char kStep[] = "step";
inline constexpr char kLoss[] = "loss";
inline constexpr char kLr[] = "lr";
inline constexpr char kGradNorm[] = "grad_norm";
inline constexpr char kTokensPerS[] = "tokens_per_s";
}  // namespace counter

}  // namespace tracerun::vocab
