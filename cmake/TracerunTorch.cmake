# Helpers for targets that include libtorch headers.
#
# tracerun_torch_target(<target>) links libtorch, forces NDEBUG (Debian's libtorch was built with it
# and at::RecordFunction's layout depends on it), and reuses one precompiled header of the libtorch
# headers our code includes. interpose/include/tracerun/torch_compat.h also fails the build when
# NDEBUG is missing, so no build type can get this wrong by accident.

if(NOT TRACERUN_WITH_TORCH)
  return()
endif()

# Torch's CMake config adds -D_GLIBCXX_USE_CXX11_ABI and USE_C10D_* flags through TORCH_CXX_FLAGS.
separate_arguments(_tracerun_torch_flags UNIX_COMMAND "${TORCH_CXX_FLAGS}")

add_library(tracerun_torch_pch STATIC "${CMAKE_CURRENT_LIST_DIR}/torch_pch.cpp")
target_link_libraries(tracerun_torch_pch PUBLIC ${TORCH_LIBRARIES})
target_compile_definitions(tracerun_torch_pch PUBLIC NDEBUG)
target_compile_options(tracerun_torch_pch PUBLIC ${_tracerun_torch_flags} -Wno-unused-parameter)
# The header must be compiled with the project's warning flags: -Wpedantic changes predefined
# macros (__cpp_runtime_arrays), and GCC silently ignores a PCH whose macros differ.
target_compile_options(tracerun_torch_pch PRIVATE -Wall -Wextra -Wpedantic)
target_precompile_headers(tracerun_torch_pch PRIVATE <torch/torch.h>)

function(tracerun_torch_target target)
  target_link_libraries(${target} PUBLIC ${TORCH_LIBRARIES})
  target_compile_definitions(${target} PUBLIC NDEBUG)
  target_compile_options(${target} PRIVATE ${_tracerun_torch_flags})
  get_target_property(_type ${target} TYPE)
  if(_type STREQUAL "EXECUTABLE")
    # Executables would get -fPIE, and GCC ignores a PCH built with -fPIC. PIC code links fine
    # into a PIE executable, so compile them like the PCH.
    set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE OFF)
    target_compile_options(${target} PRIVATE -fPIC)
  endif()
  target_precompile_headers(${target} REUSE_FROM tracerun_torch_pch)
endfunction()
