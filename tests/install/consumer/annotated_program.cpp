// A small libtorch program annotated through an installed tracerun/annotate.h: STEPS steps, each a
// "consumer_step" phase holding one "consumer_work" scope around a few ATen ops. Runs the same
// with or without tracerun.
#include <ATen/ATen.h>

#include <cstdio>
#include <cstdlib>

#include "tracerun/annotate.h"

int main(int argc, char** argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 3;
  at::Tensor x = at::ones({16, 16});
  for (int step = 0; step < steps; ++step) {
    tracerun::PhaseScope phase("consumer_step", {{"step", step}});
    tracerun::Scope work("consumer_work");
    x = at::add(at::mm(x, x), 1).div(17);
  }
  std::printf("done %d steps, x[0][0] = %f\n", steps, x[0][0].item<double>());
  return 0;
}
