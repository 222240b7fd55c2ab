// For the interposers of libtracerun (autograd_engine.cpp, optimizer_step.cpp), which define a
// libtorch symbol themselves and forward to libtorch's own: that next definition in lookup order.
// Not a general symbol lookup.
#pragma once

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>

namespace tracerun::interpose {

// The definition of `symbol` after libtracerun's (dlsym(RTLD_NEXT)). Missing, the program cannot
// go on (its call has nowhere to go): `what` is said in one line and the process aborts.
inline void* nextDefinition(const char* symbol, const char* what) {
  void* sym = dlsym(RTLD_NEXT, symbol);
  if (sym == nullptr) {
    std::fprintf(stderr, "tracerun: libtorch's %s not found after libtracerun\n", what);
    std::abort();
  }
  return sym;
}

}  // namespace tracerun::interpose
