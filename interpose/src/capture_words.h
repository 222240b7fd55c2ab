// The capture words (`--capture`, TRACERUN_CAPTURE): ops, scopes, memory, comm, cuda, tensors,
// cuda-sync, as a typed set, parsed and printed here only. Not the capture's configuration
// (capture.h) nor a flag.
//
// The launcher validates `--capture` with CaptureSet::parse (an unknown word is a usage error that
// names the valid ones) and passes CaptureSet::text() on; libtracerun reads TRACERUN_CAPTURE with
// captureWordsFromEnvironment(). Header-only: the launcher links no capture code.
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <string_view>

namespace tracerun::interpose {

enum class CaptureWord : uint8_t {
  kOps,      // ATen ops and autograd nodes
  kScopes,   // user scopes (annotations, record_function)
  kMemory,   // CPU allocations; CUDA caching-allocator events
  kComm,     // collectives: the c10d decorator and NCCL host calls
  kCuda,     // CUPTI: kernels, copies, launch calls (opt-in)
  kTensors,  // input/output tensor identities of ops (opt-in: costs)
  // CUPTI synchronization records too (opt-in, and implies kCuda): torch.profiler records them only
  // with _ExperimentalConfig(enable_cuda_sync_events=True), so `cuda` alone records what its
  // ProfilerActivity.CUDA does.
  kCudaSync,
};

// The words in their canonical order (the order text() prints), indexed by CaptureWord.
inline constexpr std::array<std::string_view, 7> kCaptureWordNames = {
    "ops", "scopes", "memory", "comm", "cuda", "tensors", "cuda-sync"};
static_assert(kCaptureWordNames.size() <= 8, "CaptureSet keeps its words in 8 bits");

class CaptureSet {
 public:
  constexpr CaptureSet() = default;
  constexpr CaptureSet(std::initializer_list<CaptureWord> words) {
    for (CaptureWord w : words) set(w);
  }
  // What is captured when nothing says otherwise: ops, scopes, memory, comm.
  static constexpr CaptureSet defaults() {
    return {CaptureWord::kOps, CaptureWord::kScopes, CaptureWord::kMemory, CaptureWord::kComm};
  }

  constexpr bool has(CaptureWord w) const { return (bits_ & bit(w)) != 0; }
  // Setting cuda-sync sets cuda too (cuda-sync is cuda with more records).
  constexpr CaptureSet& set(CaptureWord w, bool on = true) {
    bits_ = static_cast<uint8_t>(on ? bits_ | bit(w) : bits_ & ~bit(w));
    if (on && w == CaptureWord::kCudaSync)
      bits_ = static_cast<uint8_t>(bits_ | bit(CaptureWord::kCuda));
    return *this;
  }
  constexpr bool empty() const { return bits_ == 0; }
  friend constexpr bool operator==(CaptureSet a, CaptureSet b) { return a.bits_ == b.bits_; }
  friend constexpr bool operator!=(CaptureSet a, CaptureSet b) { return a.bits_ != b.bits_; }

  // "ops,scopes,memory": the words in canonical order, comma-separated ("" when empty).
  std::string text() const {
    std::string out;
    for (size_t i = 0; i < kCaptureWordNames.size(); ++i) {
      if (!has(static_cast<CaptureWord>(i))) continue;
      if (!out.empty()) out += ',';
      out += kCaptureWordNames[i];
    }
    return out;
  }

  // "ops, scopes, memory, comm, cuda, tensors, cuda-sync": for messages.
  static std::string validWords() {
    std::string out;
    for (std::string_view w : kCaptureWordNames) (out += out.empty() ? "" : ", ") += w;
    return out;
  }

  // A comma list of words, in any order, repeats and empty items (a trailing comma) allowed.
  // Returns the known words; *problem is empty when the list was good, else one clause naming the
  // first unknown word (or the empty list) and the valid words, e.g.
  // "unknown word 'bogus' (words: ops, scopes, memory, comm, cuda, tensors, cuda-sync)".
  // `cuda-sync` brings `cuda` with it.
  static CaptureSet parse(std::string_view list, std::string* problem) {
    CaptureSet out;
    std::string first;
    bool any = false;
    while (true) {
      const size_t comma = list.find(',');
      const std::string_view word = list.substr(0, comma);
      if (!word.empty()) {
        any = true;
        bool known = false;
        for (size_t i = 0; i < kCaptureWordNames.size() && !known; ++i) {
          if (word == kCaptureWordNames[i]) {
            out.set(static_cast<CaptureWord>(i));
            known = true;
          }
        }
        if (!known && first.empty()) first = "unknown word '" + std::string(word) + "'";
      }
      if (comma == std::string_view::npos) break;
      list.remove_prefix(comma + 1);
    }
    if (first.empty() && !any) first = "no words";
    if (problem != nullptr)
      *problem = first.empty() ? first : first + " (words: " + validWords() + ")";
    return out;
  }

 private:
  static constexpr uint8_t bit(CaptureWord w) {
    return static_cast<uint8_t>(1u << static_cast<unsigned>(w));
  }
  uint8_t bits_ = 0;
};

// TRACERUN_CAPTURE as libtracerun reads it: unset or empty -> CaptureSet::defaults(); otherwise
// the known words of the list, with *problem set as by CaptureSet::parse (the caller says it once).
inline CaptureSet captureWordsFromEnvironment(std::string* problem = nullptr) {
  if (problem != nullptr) problem->clear();
  const char* list = std::getenv("TRACERUN_CAPTURE");
  if (list == nullptr || *list == '\0') return CaptureSet::defaults();
  return CaptureSet::parse(list, problem);
}

}  // namespace tracerun::interpose
