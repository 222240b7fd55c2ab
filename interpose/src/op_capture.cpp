// Operators, autograd nodes and user scopes from libtorch's RecordFunction global callbacks, onto
// each thread's span stack; forward->backward flows from sequence numbers; input shapes. Also the
// library's static initializer. No allocation or lock on the hot path (docs/capture.md;
// costs in docs/performance.md). With the opt-in `tensors` category, each op's input and output
// tensor identities too (dataflow), as the span's arguments. Backward nodes carry their autograd
// graph edges as arguments (ag_node, ag_next, ag_var: docs/capture.md "Autograd graph").
//
// Sections: shapes · tensor identities · autograd graph · process groups · async scopes ·
//           start/end callbacks · hooks · library lifetime
#include <ATen/core/ivalue.h>
#include <ATen/record_function.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/accumulate_grad.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <algorithm>
#include <cstring>
#include <string>
#include <unordered_set>
#include <vector>

#include "autograd_engine.h"
#include "capture.h"
#include "collective_groups.h"
#include "crash_backtrace.h"
#include "optimizer_steps.h"
#include "tracerun/core/clock.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/torch_compat.h"

namespace tracerun::interpose {

namespace {

constexpr int16_t kNotUser = -2;  // Frame::prevUser of frames that are not user scopes

bool gShapes = false;
bool gTensors = false;  // record tensor identities (needs inputs and outputs from libtorch)
std::vector<at::CallbackHandle> gHandles;  // changed only under capture.cpp's lifecycle lock

core::Category categoryOf(at::RecordScope s) noexcept {
  switch (s) {
    case at::RecordScope::FUNCTION:
      return core::Category::kOp;
    case at::RecordScope::BACKWARD_FUNCTION:
      return core::Category::kBackward;
    case at::RecordScope::USER_SCOPE:
      return core::Category::kUser;
    default:
      return core::Category::kOther;
  }
}

// ---- shapes -------------------------------------------------------------------------------------
// The hot path hashes dtypes and dims (no formatting; cheap xor-multiply steps, one final mix); the
// text is built and interned only when this thread has not seen the hash before.

enum : uint64_t {
  kTagTensor = 1,
  kTagUndef,
  kTagList,
  kTagInt,
  kTagDouble,
  kTagBool,
  kTagNone,
  kTagString,
  kTagIntList,
  kTagOther
};

// A defined tensor: dtype, rank and dims.
inline uint64_t hashTensor(uint64_t h, const at::Tensor& t) noexcept {
  const auto sizes = t.sizes();
  h = step64(h, (kTagTensor << 32) | (uint64_t(t.scalar_type()) << 16) | sizes.size());
  for (int64_t d : sizes) h = step64(h, static_cast<uint64_t>(d));
  return h;
}

// What a list input holds, read from the list's element type. libtorch's isTensorList() and
// isIntList() are out-of-line calls that, when the kind differs, compare whole types through a
// virtual call (an int list asked isTensorList() first paid ~40 instructions; view and stride
// arguments are int lists). Equal types have equal kinds, so the kind alone gives the same answer.
enum class ListKind { kTensors, kInts, kOther };
ListKind listKind(const c10::IValue& v) noexcept {
  const auto* list = static_cast<const c10::detail::ListImpl*>(v.internalToPointer());
  switch (list->elementType->kind()) {
    case c10::TypeKind::TensorType:
      return ListKind::kTensors;
    case c10::TypeKind::IntType:
      return ListKind::kInts;
    default:
      return ListKind::kOther;
  }
}

uint64_t hashValue(uint64_t h, const c10::IValue& v) {
  // Inline tag compares only (libtorch's isTensorList()/isIntList() are calls: see listKind).
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    return t.defined() ? hashTensor(h, t) : step64(h, kTagUndef);
  }
  if (v.isInt()) return step64(h, kTagInt);
  if (v.isDouble()) return step64(h, kTagDouble);
  if (v.isBool()) return step64(h, kTagBool);
  if (v.isNone()) return step64(h, kTagNone);
  if (v.isString()) return step64(h, kTagString);
  if (v.isList()) {
    const ListKind kind = listKind(v);
    if (kind == ListKind::kTensors) {
      const auto list = v.toListRef();
      h = step64(h, (kTagList << 32) | list.size());
      for (const c10::IValue& e : list) h = hashValue(h, e);
      return h;
    }
    if (kind == ListKind::kInts) return step64(h, (kTagIntList << 32) | v.toListRef().size());
  }
  return step64(h, kTagOther);
}

const char* dtypeName(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float:
      return "f32";
    case c10::ScalarType::Double:
      return "f64";
    case c10::ScalarType::Half:
      return "f16";
    case c10::ScalarType::BFloat16:
      return "bf16";
    case c10::ScalarType::Long:
      return "i64";
    case c10::ScalarType::Int:
      return "i32";
    case c10::ScalarType::Short:
      return "i16";
    case c10::ScalarType::Char:
      return "i8";
    case c10::ScalarType::Byte:
      return "u8";
    case c10::ScalarType::Bool:
      return "bool";
    case c10::ScalarType::ComplexFloat:
      return "c64";
    case c10::ScalarType::ComplexDouble:
      return "c128";
    default:
      return c10::toString(t);
  }
}

void formatValue(std::string& out, const c10::IValue& v) {
  if (v.isTensor()) {
    const at::Tensor& t = v.toTensor();
    if (!t.defined()) {
      out += "undef";
      return;
    }
    out += dtypeName(t.scalar_type());
    out += '[';
    bool first = true;
    for (int64_t d : t.sizes()) {
      if (!first) out += ',';
      out += std::to_string(d);
      first = false;
    }
    out += ']';
  } else if (v.isList() && listKind(v) == ListKind::kTensors) {
    out += '{';
    bool first = true;
    for (const c10::IValue& e : v.toListRef()) {
      if (!first) out += ", ";
      formatValue(out, e);
      first = false;
    }
    out += '}';
  } else if (v.isInt()) {
    out += "int";
  } else if (v.isDouble()) {
    out += "float";
  } else if (v.isBool()) {
    out += "bool";
  } else if (v.isNone()) {
    out += "None";
  } else if (v.isString()) {
    out += "str";
  } else if (v.isList() && listKind(v) == ListKind::kInts) {
    out += "int[" + std::to_string(v.toListRef().size()) + "]";
  } else {
    out += v.tagKind();
  }
}

core::StringId shapesOf(ThreadState& t, const at::RecordFunction& fn) {
  const auto inputs = fn.inputs();
  if (inputs.empty()) return 0;
  uint64_t h = inputs.size();
  for (const c10::IValue& v : inputs) {
    // Tensors inline (most inputs); the rest, lists included, through hashValue.
    if (v.isTensor() && v.toTensor().defined()) [[likely]] {
      h = hashTensor(h, v.toTensor());
    } else {
      h = hashValue(h, v);
    }
  }
  h = mix64(h, 0);  // the cheap steps above leave the low bits (the table index) weak
  core::StringId id = 0;
  if (t.shapes.find(h, &id)) return id;
  std::string text;
  for (const c10::IValue& v : inputs) {
    if (!text.empty()) text += ", ";
    formatValue(text, v);
  }
  id = t.session->strings().intern(text);
  t.shapes.insert(h, id);
  countStat(Stat::kShapeCacheMisses);
  return id;
}

// The text of one tensor's dtype and dims ("f32[8,4]"), through the same cache as op signatures
// (a one-tensor signature has the same text).
core::StringId tensorShape(ThreadState& t, const at::Tensor& tensor) {
  if (!tensor.defined()) return 0;
  const uint64_t h = mix64(hashTensor(1, tensor), 0);
  core::StringId id = 0;
  if (t.shapes.find(h, &id)) return id;
  std::string text;
  formatValue(text, c10::IValue(tensor));
  id = t.session->strings().intern(text);
  t.shapes.insert(h, id);
  countStat(Stat::kShapeCacheMisses);
  return id;
}

// ---- tensor identities -------------------------------------------------------------------------
// A tensor's identity: the address of its storage's data (views share it) with the low 16 bits of
// its version counter in the top 16 bits (an in-place op's output differs from its input; user-
// space addresses on x86-64 fit in 47 bits). An address reused after a free gives the same
// identity again: a reader takes the latest producer that ended before the consumer started
// (docs/capture.md). 0: no identity (undefined, no storage, empty, or a wrapped number).
// Measured against a boxed fallback on the Fake key (performance.md): RecordFunction's boxed
// inputs and captured outputs cost less, and the fallback would need the callback anyway.

int64_t tensorIdentity(const at::Tensor& t) noexcept {
  if (!t.defined()) return 0;
  const c10::TensorImpl* impl = t.unsafeGetTensorImpl();
  // A Python number wrapped by the argument parser (the 1 of `x.add_(1)`) is made outside the
  // dispatcher, by no op; its few bytes may be carved from a freed output's memory, whose
  // identity it would then take (a false dataflow edge, at random with ASLR).
  if (impl->is_wrapped_number()) return 0;
  const c10::Storage& storage = impl->unsafe_storage();
  if (!storage) return 0;
  const auto data = reinterpret_cast<uint64_t>(storage.data());
  if (data == 0) return 0;
  const c10::VariableVersion& version = impl->version_counter();
  const uint64_t v = version.enabled() ? version.current_version() & 0xFFFFu : 0;
  return static_cast<int64_t>((data & ((uint64_t{1} << 48) - 1)) | (v << 48));
}

// Appends the identities of the tensors in `values` (tensor lists flattened) to ids[n..max);
// returns the new n. Those beyond max are counted.
template <typename Values>  // ArrayRef of the inputs, vector of the outputs
int collectIdentities(const Values& values, int64_t* ids, int n, int max) noexcept {
  for (const c10::IValue& v : values) {
    if (v.isTensor()) {
      if (n == max) {
        countStat(Stat::kTensorIdsDropped);
        continue;
      }
      ids[n++] = tensorIdentity(v.toTensor());
    } else if (v.isList() && listKind(v) == ListKind::kTensors) {
      for (const c10::IValue& e : v.toListRef()) {
        if (!e.isTensor()) continue;
        if (n == max) {
          countStat(Stat::kTensorIdsDropped);
          continue;
        }
        ids[n++] = tensorIdentity(e.toTensor());
      }
    }
  }
  return n;
}

// ---- autograd graph ----------------------------------------------------------------------------
// A backward node's span carries, as arguments (docs/capture.md "Autograd graph"):
//   ag_node  the node's identity: its address (low 48 bits), unique while its graph lives
//   ag_next  one per next edge, in next_edges() order: the target node's identity | input_nr << 48,
//            0 for an edge without a function (an input that needs no gradient)
//   ag_var   AccumulateGrad only: the variable's data address (Python's tensor.data_ptr()); with
//            shapes, its dtype and dims are the span's detail
// The node comes from autograd_engine.cpp (the engine's evaluate_function); it is trusted only
// when its sequence number is the RecordFunction's.

constexpr uint64_t kAddressMask = (uint64_t{1} << 48) - 1;
constexpr uint64_t kMaxInputNr = 0x7FFF;  // keeps the value positive

const torch::autograd::Node* evaluatingNode(const at::RecordFunction& fn) noexcept {
  const auto* node = static_cast<const torch::autograd::Node*>(tlsEvaluatingNode);
  if (node == nullptr || static_cast<int64_t>(node->sequence_nr()) != fn.seqNr()) return nullptr;
  return node;
}

const torch::autograd::AccumulateGrad* asAccumulateGrad(const torch::autograd::Node* node,
                                                        int64_t seq) noexcept {
  // AccumulateGrad nodes have no sequence number (UINT64_MAX): the cast runs only for those.
  if (seq != -1) return nullptr;
  return dynamic_cast<const torch::autograd::AccumulateGrad*>(node);
}

int64_t nodeIdentity(const void* node) noexcept {
  return static_cast<int64_t>(reinterpret_cast<uintptr_t>(node) & kAddressMask);
}

// Arguments three to a record: the first record goes into the ring together with the span (a drop
// never splits them), the rest one by one after it.
class ArgsWriter {
 public:
  ArgsWriter(ThreadState& t, const Frame& f, int64_t endNs) noexcept : t_(t), f_(f), end_(endNs) {
    rec_.owner = f.id;
  }
  void add(core::StringId key, int64_t value) noexcept {
    rec_.args[rec_.count++] = core::ArgsRecord::Arg{key, 0, value};
    if (rec_.count == 3) flush();
  }
  void finish() noexcept {
    if (first_ || rec_.count != 0) flush();
  }

 private:
  void flush() noexcept {
    core::RecordRing& ring = t_.buffer->ring;
    if (first_) {
      first_ = false;
      if (!ring.reserve(2)) [[unlikely]] {
        dropped_ = true;  // the span is lost: its arguments with it
      } else {
        buildSpan(ring.pending(0), f_, end_);
        std::memcpy(ring.pending(1), &rec_, sizeof rec_);
        ring.commit(2);
      }
    } else if (!dropped_) {
      ring.tryPush(core::Record::from(rec_));
    }
    rec_.count = 0;
  }

  ThreadState& t_;
  const Frame& f_;
  int64_t end_;
  core::ArgsRecord rec_;
  bool first_ = true;
  bool dropped_ = false;
};

// The span of a backward frame whose node is known, with the node's graph arguments.
void emitBackwardNode(ThreadState& t, const Frame& f, int64_t endNs) noexcept {
  const auto* node = static_cast<const torch::autograd::Node*>(f.node);
  ArgsWriter out(t, f, endNs);
  for (int i = 0; i < f.nargs; ++i) out.add(f.args[i].key, f.args[i].value);
  out.add(t.intern("ag_node"), nodeIdentity(node));
  const core::StringId next = t.intern("ag_next");
  for (const torch::autograd::Edge& e : node->next_edges()) {
    int64_t value = 0;
    if (e.function) {
      const uint64_t nr = e.input_nr < kMaxInputNr ? e.input_nr : kMaxInputNr;
      value = nodeIdentity(e.function.get()) | static_cast<int64_t>(nr << 48);
    }
    out.add(next, value);
  }
  if (const auto* acc = asAccumulateGrad(node, f.seq)) {
    const at::Tensor& v = acc->variable;
    const int64_t data =
        v.defined() && v.has_storage() ? reinterpret_cast<intptr_t>(v.data_ptr()) : 0;
    out.add(t.intern("ag_var"), data);
  }
  out.finish();
}

// ---- process groups -----------------------------------------------------------------------------
// A torch.distributed call's dispatcher op (c10d::allreduce_...) gets its ProcessGroup's size and
// this rank's place in it as arguments (group_size, group_rank), and publishes them for the
// backend's async scope of the same call (collective_groups.h). Only with inputs (shapes or
// tensors on). Every op pays a test of its name's first byte; those starting with 'c' a call.

// The address of a tensor's first element, of a tensor list's first tensor's, or, with `nested`,
// of a list of tensor lists' first tensor's (scatter's lists to send, one per rank); 0 for anything
// else. The same tensor handed on to the backend has the same address.
// May throw (a storage whose data may not be read, a nested tensor's offset): callers catch.
uint64_t firstTensorAddress(const c10::IValue& v, bool nested = false) {
  const at::Tensor* t = nullptr;
  if (v.isTensor()) {
    t = &v.toTensor();
  } else if (v.isList() && listKind(v) == ListKind::kTensors) {
    const auto list = v.toListRef();
    if (list.empty() || !list[0].isTensor()) return 0;
    t = &list[0].toTensor();
  } else if (nested && v.isList()) {
    const auto lists = v.toListRef();
    if (lists.empty() || !lists[0].isList() || listKind(lists[0]) != ListKind::kTensors) return 0;
    const auto list = lists[0].toListRef();
    if (list.empty() || !list[0].isTensor()) return 0;
    t = &list[0].toTensor();
  }
  if (t == nullptr || !t->defined()) return 0;
  const c10::TensorImpl* impl = t->unsafeGetTensorImpl();
  const c10::Storage& storage = impl->unsafe_storage();
  if (!storage || storage.data() == nullptr) return 0;
  return reinterpret_cast<uint64_t>(storage.data()) +
         static_cast<uint64_t>(impl->storage_offset()) * impl->dtype().itemsize();
}

// Is v a torch.distributed ProcessGroup (a TorchScript custom-class object)? Then its size and
// this process's rank in it.
bool processGroupOf(const c10::IValue& v, CollectiveGroup* group) {
  if (!v.isObject()) return false;
  const c10::ivalue::Object& object = v.toObjectRef();
  if (object.slots().size() != 1 || !object.getSlot(0).isCapsule()) return false;
  const auto type = object.type();
  if (!type || !type->name() ||
      type->name()->qualifiedName() != "__torch__.torch.classes.c10d.ProcessGroup") {
    return false;
  }
  const auto holder = object.getSlot(0).toCapsule();
  const auto* pg = static_cast<const c10d::ProcessGroup*>(holder.get());
  group->size = pg->getSize();
  group->rank = pg->getRank();
  group->id = processGroupId(reinterpret_cast<uint64_t>(pg));  // its name, from the Python hooks
  return true;
}

uint32_t scatterOpCode() noexcept {
  static const uint32_t code = collectiveOpCode("c10d::scatter_");
  return code;
}

// For an op named c10d::*: gives frame f its group's arguments and publishes the group under the
// call's tensors. Called for ops whose name starts with 'c' only, off the hot path: onStart's
// own code stays small enough for GCC to inline what it calls (interning, the clock).
[[gnu::noinline]] void noteProcessGroup(ThreadState& t, const at::RecordFunction& fn,
                                        const char* name, Frame& f) noexcept {
  if (std::strncmp(name, "c10d::", 6) != 0) return;
  try {
    CollectiveGroup group;
    bool found = false;
    uint64_t keys[kCollectiveGroupKeys];
    int nkeys = 0;
    const uint32_t op = collectiveOpCode(name);
    // Only scatter's list of tensor lists is a key: its Gloo span names the first tensor of it.
    // Other ops' (gather's outputs, reduce_scatter's inputs) would only linger in the table.
    const bool scatter = op == scatterOpCode();
    for (const c10::IValue& v : fn.inputs()) {
      if (!found && processGroupOf(v, &group)) {
        found = true;
      } else if (nkeys < kCollectiveGroupKeys) {
        const uint64_t key = firstTensorAddress(v, scatter);
        if (key != 0) keys[nkeys++] = key;
      }
    }
    if (!found) return;
    // A barrier's backend span has no input (2.x gives the op a dummy tensor): the no-tensor key.
    if (nkeys == 0 || isBarrierName(name)) {
      keys[0] = kNoTensorKey;
      nkeys = 1;
    } else if (nkeys == 1 && scatter) {
      // Gloo's scatter span names the root's first tensor to send (the op's second key), and on
      // the other ranks, which send nothing, no tensor.
      keys[nkeys++] = kNoTensorKey;
    }
    f.args[0] = {t.intern(vocab::arg::kGroupSize), 0, group.size};
    f.args[1] = {t.intern(vocab::arg::kGroupRank), 0, group.rank};
    f.nargs = 2;
    if (group.id >= 0) f.args[f.nargs++] = {t.intern(vocab::arg::kGroupId), 0, group.id};
    publishCollectiveGroup(keys, nkeys, op, group);
  } catch (...) {
    // The checks above avoid libtorch's throwing paths; should one throw, the call has no group.
  }
}

// ---- async scopes -------------------------------------------------------------------------------
// Async RecordFunctions ("gloo:all_reduce"...) start and end on threads that are not nested
// inside each other's spans: they never enter the stack; they become depth-0 spans on the
// process's async track. Their context is the one allocation per event this file makes.

struct AsyncContext : at::ObserverContext {
  int64_t start_ns = 0;
  core::StringId name = 0;
  core::StringId detail = 0;
  core::EventId id = 0;
  int64_t seq = -1;
  core::Category category = core::Category::kComm;
  CollectiveGroup group;  // from the call's dispatcher op; size 0 when none
};

// Out of line: inlined, its code made GCC stop inlining interning and the clock into onStart,
// the hot path (+50 ns per op measured, docs/performance.md).
[[gnu::noinline]] std::unique_ptr<at::ObserverContext> startAsync(ThreadState& t,
                                                                  const at::RecordFunction& fn) {
  auto c = std::make_unique<AsyncContext>();
  const char* const name = fn.name();
  c->name = t.intern(name);
  c->detail = gShapes ? shapesOf(t, fn) : 0;
  c->id = t.buffer->nextId();
  c->seq = fn.seqNr();
  c->category =
      fn.scope() == at::RecordScope::USER_SCOPE ? core::Category::kComm : categoryOf(fn.scope());
  if (gShapes || gTensors) {  // inputs are there: the group its c10d:: op published for them
    try {
      uint64_t key = 0;
      for (const c10::IValue& v : fn.inputs()) {
        key = firstTensorAddress(v);
        if (key != 0) break;
      }
      CollectiveGroup group;
      if (takeCollectiveGroup(key == 0 ? kNoTensorKey : key, collectiveOpCode(name), &group)) {
        c->group = group;
      }
    } catch (...) {
      // A tensor whose address may not be read: the span has no group.
    }
  }
  c->start_ns = core::nowNs();
  return c;
}

void endAsync(const AsyncContext& c, int64_t endNs) {
  ThreadState* t = threadState();
  if (t == nullptr) return;
  core::SpanRecord s;
  s.category = c.category;
  s.name = c.name;
  s.start_ns = c.start_ns;
  s.end_ns = endNs;
  s.id = c.id;
  s.seq = c.seq;
  s.detail = c.detail;
  s.track = asyncTrack();
  if (c.group.size <= 0) {
    pushSpanWithArgs(*t, s, nullptr, 0);
    return;
  }
  core::ArgsRecord::Arg args[3] = {{t->intern(vocab::arg::kGroupSize), 0, c.group.size},
                                   {t->intern(vocab::arg::kGroupRank), 0, c.group.rank}};
  int nargs = 2;
  if (c.group.id >= 0) args[nargs++] = {t->intern(vocab::arg::kGroupId), 0, c.group.id};
  pushSpanWithArgs(*t, s, args, nargs);
}

// ---- start/end callbacks ------------------------------------------------------------------------

void noteForwardOp(ThreadState& t, const at::RecordFunction& fn, const Frame& f) {
  if (C10_UNLIKELY(t.seqMap == nullptr)) {
    t.seqMap = createSeqMapForThread(fn.threadId());
    if (t.seqMap == nullptr) return;
    t.seqMap->track.store(t.buffer->track, std::memory_order_relaxed);
  }
  t.seqMap->put(f.seq, f.start_ns);
}

void emitForwardBackwardFlow(ThreadState& t, const at::RecordFunction& fn, const Frame& f) {
  const uint64_t fwdThread = fn.forwardThreadId() != 0 ? fn.forwardThreadId() : fn.threadId();
  const SeqMap* m = seqMapForThread(fwdThread);
  int64_t srcStart = 0;
  if (m == nullptr || !m->get(f.seq, &srcStart)) {
    countStat(Stat::kFlowMissing);
    return;
  }
  core::FlowRecord r;
  r.flow = core::FlowKind::kForwardBackward;
  r.src_track = m->track.load(std::memory_order_relaxed);
  r.dst_track = t.buffer->track;
  r.src_ts_ns = srcStart;
  r.dst_ts_ns = f.start_ns;
  t.buffer->ring.tryPush(core::Record::from(r));
}

// ---- steps of C++ optimizers (optimizer_steps.h) -----------------------------------------------

// The identity (Frame::key) of the step frames this file opens itself: no RecordFunction owns them.
constexpr char kStepFrameKey = 0;

bool gScopes = false;  // user scopes (and so phase spans) are being recorded

// Opens step t.pendingStep as a phase frame at the top of the stack, before the op or scope that
// is starting (called from onStart, on the first one after the previous optimizer step).
[[gnu::noinline]] void openPendingStep(ThreadState& t) noexcept {
  const uint32_t step = t.pendingStep;
  t.pendingStep = 0;
  const uint32_t d = t.depth;
  if (d >= kMaxDepth) return;
  Frame& f = t.frames[d];
  f.key = &kStepFrameKey;
  f.node = nullptr;
  f.category = core::Category::kPhase;
  f.depth = static_cast<uint16_t>(d);
  f.parent = d > 0 ? t.frames[d - 1].id : 0;
  f.name = t.intern(vocab::phase::kStep);
  f.detail = 0;
  f.seq = -1;
  f.ninputs = 0;
  f.nargs = 1;
  f.args[0].key = t.intern(vocab::arg::kStep);
  f.args[0].value = step;
  f.id = t.buffer->nextId();
  f.prevUser = t.userTop;
  t.userTop = static_cast<int16_t>(d);
  f.start_ns = core::nowNs();
  t.stepFrame = static_cast<int32_t>(d);
  t.depth = d + 1;
}

// Forgets the open step frame without writing it (the frames above it are the caller's).
void dropStepFrame(ThreadState& t) noexcept {
  t.userTop = t.frames[t.stepFrame].prevUser;
  t.stepFrame = -1;
  t.stepEndDeferred = false;
}

std::unique_ptr<at::ObserverContext> onStart(const at::RecordFunction& fn) {
  ThreadState* t = threadState();
  if (t == nullptr) return nullptr;
  if (C10_UNLIKELY(t->pendingStep != 0)) openPendingStep(*t);
  // Async scopes (c10d's "gloo:all_reduce"...) are user scopes: ops and backward nodes skip the
  // out-of-line isAsync() call.
  const at::RecordScope scope = fn.scope();
  if (scope != at::RecordScope::FUNCTION && scope != at::RecordScope::BACKWARD_FUNCTION &&
      C10_UNLIKELY(fn.isAsync())) {
    return startAsync(*t, fn);
  }
  const uint32_t d = t->depth++;
  if (C10_UNLIKELY(d >= kMaxDepth)) {
    countStat(Stat::kStackOverflow);
    return nullptr;
  }
  // The calls first, the frame after them: its fields are then written once, not reloaded.
  const char* const opName = fn.name();
  const core::StringId name = t->intern(opName);
  const core::StringId detail = C10_UNLIKELY(gShapes) ? shapesOf(*t, fn) : 0;
  const core::Category category = categoryOf(scope);
  Frame& f = t->frames[d];
  f.ninputs = 0;
  if (C10_UNLIKELY(gTensors) && category == core::Category::kOp) {
    f.ninputs = static_cast<uint8_t>(collectIdentities(fn.inputs(), f.inputs, 0, kMaxTensorInputs));
  }
  f.key = &fn;
  f.node = nullptr;
  f.category = category;
  f.depth = static_cast<uint16_t>(d);
  f.parent = d > 0 ? t->frames[d - 1].id : 0;
  f.name = name;
  f.detail = detail;
  f.seq = fn.seqNr();
  if (category == core::Category::kBackward) {
    const torch::autograd::Node* node = evaluatingNode(fn);
    f.node = node;
    // With shapes: the parameter's shape, not its gradient's (--no-shapes keeps every detail 0).
    const auto* acc = node != nullptr && gShapes ? asAccumulateGrad(node, f.seq) : nullptr;
    if (acc != nullptr) f.detail = tensorShape(*t, acc->variable);
  }
  f.id = t->buffer->nextId();
  f.nargs = 0;
  if (C10_UNLIKELY(opName[0] == 'c') && (gShapes || gTensors)) noteProcessGroup(*t, fn, opName, f);
  if (category == core::Category::kUser) {
    f.prevUser = t->userTop;
    t->userTop = static_cast<int16_t>(d);
  } else {
    f.prevUser = kNotUser;
  }
  f.start_ns = core::nowNs();
  if (f.seq >= 0 && category == core::Category::kOp) noteForwardOp(*t, fn, f);
  return nullptr;
}

void popFrame(ThreadState& t, uint32_t index, int64_t endNs) {
  const Frame& f = t.frames[index];
  emitSpan(t, f, endNs);
  if (f.prevUser != kNotUser) t.userTop = f.prevUser;
}

// Writes the open step frame, the top of the stack, ending at endNs, and makes the thread's next
// op or scope open the step after it.
void endStepFrame(ThreadState& t, int64_t endNs) noexcept {
  const auto s = static_cast<uint32_t>(t.stepFrame);
  const int64_t number = t.frames[s].args[0].value;
  popFrame(t, s, endNs);
  t.depth = s;
  t.stepFrame = -1;
  t.stepEndDeferred = false;
  t.pendingStep = static_cast<uint32_t>(number) + 1;
}

void onEnd(const at::RecordFunction& fn, at::ObserverContext* ctx) {
  const int64_t endNs = core::nowNs();
  if (C10_UNLIKELY(ctx != nullptr)) {
    endAsync(*static_cast<AsyncContext*>(ctx), endNs);
    return;
  }
  ThreadState* t = threadState();
  if (t == nullptr) return;
  if (C10_UNLIKELY(t->depth == 0)) {
    countStat(Stat::kUnmatchedEnd);
    return;
  }
  if (C10_UNLIKELY(t->depth > kMaxDepth)) {
    --t->depth;
    return;
  }
  uint32_t i = t->depth - 1;
  if (C10_UNLIKELY(t->frames[i].key != &fn)) {
    // Not the innermost span: close the ones above it (their ends never came), or ignore an end
    // whose start this thread did not see.
    uint32_t j = i;
    while (j > 0 && t->frames[j].key != &fn) --j;
    if (t->frames[j].key != &fn) {
      countStat(Stat::kUnmatchedEnd);
      return;
    }
    for (uint32_t k = i; k > j; --k) {
      if (C10_UNLIKELY(static_cast<int32_t>(k) == t->stepFrame)) {
        dropStepFrame(*t);  // a step that never reached its optimizer step
        continue;
      }
      popFrame(*t, k, endNs);
    }
    countStat(Stat::kClosedByParent, i - j);
    i = j;
  }
  const Frame& f = t->frames[i];
  if (C10_UNLIKELY(gTensors) && f.category == core::Category::kOp) {
    int64_t outputs[kMaxTensorOutputs];
    const int n = collectIdentities(fn.outputs(), outputs, 0, kMaxTensorOutputs);
    emitSpan(*t, f, endNs, outputs, n);
    if (f.prevUser != kNotUser) t->userTop = f.prevUser;
  } else if (f.node != nullptr) {
    emitBackwardNode(*t, f, endNs);
    if (f.prevUser != kNotUser) t->userTop = f.prevUser;
  } else {
    popFrame(*t, i, endNs);
  }
  if (f.category == core::Category::kBackward && f.seq >= 0) emitForwardBackwardFlow(*t, fn, f);
  t->depth = i;
  // The scope around the optimizer's step() has ended: the step ends with it.
  if (C10_UNLIKELY(t->stepEndDeferred) && static_cast<int32_t>(i) == t->stepFrame + 1) {
    endStepFrame(*t, endNs);
  }
}

// ---- hooks --------------------------------------------------------------------------------------

void startOps(const CaptureConfig& config) {
  gShapes = config.shapes && config.ops;
  gTensors = config.tensors && config.ops;
  clearCollectiveGroups();  // an earlier capture's calls are not this one's
  std::unordered_set<at::RecordScope, std::hash<at::RecordScope>> scopes;
  if (config.ops) {
    scopes.insert(at::RecordScope::FUNCTION);
    scopes.insert(at::RecordScope::BACKWARD_FUNCTION);
  }
  if (config.scopes) scopes.insert(at::RecordScope::USER_SCOPE);
  gScopes = config.scopes;
  if (scopes.empty()) return;
  gHandles.push_back(at::addGlobalCallback(at::RecordFunctionCallback(&onStart, &onEnd)
                                               .needsInputs(gShapes || gTensors)
                                               .needsOutputs(gTensors)
                                               .scopes(scopes)));
}

void stopOps() {
  gScopes = false;
  for (at::CallbackHandle h : gHandles) at::removeCallback(h);
  gHandles.clear();
}

}  // namespace

CaptureHooks opCaptureHooks() {
  return CaptureHooks{&startOps, &stopOps};
}

// ---- steps of C++ optimizers: the entry points (optimizer_steps.h) ------------------------------

bool optimizerStepBegins() noexcept {
  if (!gScopes) return false;
  ThreadState* t = threadState();
  if (t == nullptr || t->programMarksSteps) return false;
  // A "step" phase of the program's own below: it marks its steps, this thread gets none of ours.
  const core::StringId step = t->intern(vocab::phase::kStep);
  const uint32_t open = std::min(t->depth, kMaxDepth);
  for (uint32_t i = 0; i < open; ++i) {
    const Frame& f = t->frames[i];
    if (f.category == core::Category::kPhase && f.name == step && f.key != &kStepFrameKey) {
      t->programMarksSteps = true;
      t->pendingStep = 0;
      return false;
    }
  }
  return true;
}

void optimizerStepEnds() noexcept {
  ThreadState* t = threadState();
  if (t == nullptr) return;
  ++t->optimizerSteps;
  const int32_t s = t->stepFrame;
  if (s < 0 || t->depth > kMaxDepth || t->frames[s].key != &kStepFrameKey) {
    // No step open (the first step() before trainingBegins): the next op opens the next one.
    t->stepFrame = -1;
    t->pendingStep = t->optimizerSteps + 1;
    return;
  }
  if (static_cast<uint32_t>(s) + 1 == t->depth) {
    endStepFrame(*t, core::nowNs());
  } else {
    // step() ran inside a scope the program opened after the step began (an iteration's own
    // scope): the step ends when that scope does (onEnd), so both stay whole and nested.
    t->stepEndDeferred = true;
  }
}

void trainingBegins() noexcept {
  if (!gScopes) return;
  ThreadState* t = threadState();
  if (t == nullptr || t->programMarksSteps || t->stepFrame >= 0) return;
  t->pendingStep = t->optimizerSteps + 1;
}

// ---- library lifetime ---------------------------------------------------------------------------
// Runs when libtracerun.so is loaded (after libtorch, which it links) and at normal exit.

namespace {
struct LibraryLifetime {
  LibraryLifetime() {
    installCrashBacktraceFromEnvironment();
    addCaptureHooks(opCaptureHooks());
    addCaptureHooks(memoryCaptureHooks());
    startFromEnvironment();
  }
  ~LibraryLifetime() { stopCapture(); }
};
LibraryLifetime gLibraryLifetime;
}  // namespace

}  // namespace tracerun::interpose
