// Anchor for the shared libtorch precompiled header (cmake/TracerunTorch.cmake).
