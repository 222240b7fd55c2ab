// The C ABI between tracerun/annotate.h (inlined into the annotated program) and libtracerun.so
// (interpose/src/annotate_entry.cpp, which defines the entry points), and the integer enums it
// passes. One declaration for both sides. No libtorch; not the annotation API (that is annotate.h).
#pragma once

#include <cstdint>

// libtracerun.so, which defines the entry points, sets this to nothing before including.
#ifndef TRACERUN_ANNOTATE_WEAK
#define TRACERUN_ANNOTATE_WEAK __attribute__((weak))
#endif

// ---- Entry points defined by libtracerun.so (weak: null when it is not loaded) -----------------
// A stable C ABI; `kind`, `category` use the integer values of the enums below.
extern "C" {
struct tracerun_annotate_arg {
  const char* key;
  int64_t value;
};
// Adds a category, detail text and arguments to the user scope `record_function` just opened on
// this thread. Ignored when that scope is not being recorded.
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_attach(const void* record_function, int kind,
                                                     const char* detail,
                                                     const tracerun_annotate_arg* args, int n);
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_counter(const char* name, double value);
// Sets this thread's memory category; returns the previous one.
TRACERUN_ANNOTATE_WEAK int tracerun_annotate_set_memory_category(int category);
// Non-zero while tracerun is capturing in this process.
TRACERUN_ANNOTATE_WEAK int tracerun_annotate_capturing(void);
// For callers that cannot hold an at::RecordFunction (Python through ctypes: the nn.Module hooks
// of interpose/python/sitecustomize.py; defined in annotate_scope_entry.cpp). begin opens a user
// scope like tracerun_annotate_attach's and returns a token (0 when nothing records user scopes);
// end closes it and every scope opened after it on this thread, first replacing its detail when
// `detail` is not null.
TRACERUN_ANNOTATE_WEAK int64_t tracerun_annotate_scope_begin(int kind, const char* name,
                                                             const char* detail,
                                                             const tracerun_annotate_arg* args,
                                                             int n);
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_scope_end(int64_t token, const char* detail);
// Sets the memory category of blocks that are already allocated (parameters made before any tag,
// gradients made by autograd, an optimizer's state): ptrs[0..n) are the blocks' base addresses
// (a tensor's storage data pointer) on one device (device_type 0 = CPU with device_index -1, 1 =
// CUDA). Each block's whole allocation takes the category (the analysis reads the last tag before
// its free); a pointer that is not a live block is ignored by the analysis. `total` is the device's
// live bytes now, as its allocation records count them; < 0 on the CPU means tracerun's own count,
// and on another device that no record is written. Defined in annotate_entry.cpp; no-op unless
// memory is being captured.
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_tag_memory(const uint64_t* ptrs, int n,
                                                         int device_type, int device_index,
                                                         int category, int64_t total);
// A block that no traced allocator sees, on an offload device (OffloadDevice below: files of
// ZeRO-Infinity's states, pinned host memory of ZeRO-Offload): `bytes` > 0 allocates the block
// named `block` (any id unique on that device), < 0 frees it; `total` is the device's live bytes
// after the event, as the caller counts them. Other device types are ignored (their allocators are
// traced). Defined in memory_capture.cpp; no-op unless memory is being captured.
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_offload_memory(uint64_t block, int64_t bytes,
                                                             int device_type, int device_index,
                                                             int category, int64_t total);
// The torch.distributed process group whose ProcessGroup object is at `address` is named
// `group_id` (>= 0; vocab::arg::kGroupId says how a name becomes a number): its calls' spans carry
// it, so the report tells groups of one size apart. The Python hooks call it as torch creates each
// group (_tracerun_groups.py). Defined in annotate_entry.cpp; writes no record (the name is kept
// for the calls, also those of a capture started later).
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_process_group(uint64_t address, int64_t group_id);
// The calling thread's training begins here: with libtorch's own optimizers (torch::optim), the
// thread's next op opens step 1, which the first optimizer step ends (without this call, steps are
// marked from the second on; interpose/src/optimizer_steps.h). Defined in annotate_scope_entry.cpp;
// no-op unless phase spans are being captured. tracerun::tagTraining calls it.
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_training_begins(void);
// Stops the capture and closes this process's shard now, as a normal exit does; later records are
// not captured. For exits that skip C++ static destructors: sitecustomize.py registers it with
// CPython's Py_AtExit, which an uncaught KeyboardInterrupt reaches before Python ends the process
// by SIGINT. The calling thread's scopes opened by tracerun_annotate_scope_begin are closed first.
// Defined in annotate_scope_entry.cpp; no-op when not capturing.
TRACERUN_ANNOTATE_WEAK void tracerun_annotate_close(void);
}

namespace tracerun {

// Same values as core::MemoryCategory (annotate_entry.cpp checks it at compile time).
enum class MemoryCategory : int {
  kUnknown = 0,
  kParameter = 1,
  kGradient = 2,
  kOptimizerState = 3,
  kActivation = 4,
  kTemporary = 5,
  kOther = 6,
  kInput = 7,  // the batches fed to the model: inputs and targets (PyTorch's INPUT)
};

// The device types of tracerun_annotate_offload_memory (beside c10's CPU 0 and CUDA 1; chosen
// far from c10::DeviceType's values). Reports name them "nvme" and "cpu-offload".
enum class OffloadDevice : int {
  kNvme = 100,        // files on a local disk (--offload-optimizer nvme:DIR)
  kPinnedHost = 101,  // pinned host memory of a CUDA process (--offload-optimizer cpu)
};

// What a scope is; shown as the span's category in the trace.
enum class ScopeKind : int {
  kUser = 0,    // anything
  kPhase = 1,   // a training phase: step, forward, backward, optimizer, all-reduce of grads...
  kModule = 2,  // a module's forward or backward (name = module path, detail = module type)
};

}  // namespace tracerun
