// Steps of C++ programs that train with libtorch's own optimizers (torch::optim::SGD, Adam, AdamW,
// Adagrad, RMSprop, LBFGS), unmodified: the contract between optimizer_step.cpp, which interposes
// their step() and calls these, and op_capture.cpp, which owns the frame stack and defines them.
// Not for programs that mark their own steps (tracerun::Step, gpttrain): the first optimizer step
// inside a "step" phase of the program's turns this off for its thread.
//
// What is recorded on the thread that calls step():
//   - an "optimizer" phase span around each call;
//   - a "step" phase span (argument step = its number) from the first op or scope the thread runs
//     after the previous optimizer step ended, to the end of the next one. The first step is
//     marked when the program said where training begins (tracerun_annotate_training_begins,
//     which tracerun::tagTraining calls); otherwise steps are marked from the second on. A step
//     that never reaches its optimizer step (evaluation after the last one) is not written.
#pragma once

namespace tracerun::interpose {

// Before the optimizer's own step: false when nothing records phase spans on this thread (no
// capture, no `scopes` word, or the program marks its own steps), then the caller records nothing.
bool optimizerStepBegins() noexcept;

// After it (only when optimizerStepBegins returned true): ends the open step, if any, and makes
// the thread's next op or scope open the next one.
void optimizerStepEnds() noexcept;

// The program's training begins on this thread: its next op or scope opens step 1 (unless a step
// is open or the program marks its own steps).
void trainingBegins() noexcept;

}  // namespace tracerun::interpose
