// Which autograd node this thread's engine is evaluating: the one piece of the backward graph that
// RecordFunction does not hand to its callbacks. Set by autograd_engine.cpp; read by
// op_capture.cpp. Not the capture of the node itself (op_capture.cpp), not a public header.
#pragma once

namespace tracerun::interpose {

// The torch::autograd::Node whose Engine::evaluate_function is running on this thread (the
// innermost one, for reentrant backward), null outside one. Set around every evaluation,
// capturing or not: one TLS store and restore per node.
extern __thread const void* tlsEvaluatingNode __attribute__((tls_model("initial-exec")));

}  // namespace tracerun::interpose
