# Detects optional dependencies and sets TRACERUN_WITH_* to what is really available.
# A missing dependency turns its component off with a message; configure never fails for it.

set(_tracerun_summary "")
macro(tracerun_option name description)
  option(TRACERUN_WANT_${name} "${description}" ON)
endmacro()
function(tracerun_report name value reason)
  set(TRACERUN_WITH_${name} ${value} PARENT_SCOPE)
  if(value)
    set(_line "  TRACERUN_WITH_${name}: ON  ${reason}")
  else()
    set(_line "  TRACERUN_WITH_${name}: OFF (${reason})")
  endif()
  set_property(GLOBAL APPEND PROPERTY TRACERUN_SUMMARY "${_line}")
endfunction()

find_package(PkgConfig QUIET)
find_package(SQLite3 REQUIRED)  # trace/ is the core of the project: a hard requirement
find_package(Threads REQUIRED)

tracerun_option(TORCH "libtorch: capture library, trainer, samples")
tracerun_option(CUDA "CUDA toolkit (compile-only without a GPU)")
tracerun_option(CUPTI "CUPTI activity capture")
tracerun_option(NCCL "NCCL host-call interposition")
tracerun_option(VIEWER "traceview (Dear ImGui + GLFW + OpenGL3)")
tracerun_option(DOT "tracedot (Graphviz)")

# --- libtorch
set(TRACERUN_WITH_TORCH OFF)
if(TRACERUN_WANT_TORCH)
  find_package(Torch QUIET)
  if(Torch_FOUND)
    tracerun_report(TORCH ON "libtorch ${Torch_VERSION} at ${Torch_DIR}")
  else()
    tracerun_report(TORCH OFF "find_package(Torch) failed; install libtorch-dev or pass CMAKE_PREFIX_PATH")
  endif()
else()
  tracerun_report(TORCH OFF "disabled by TRACERUN_WANT_TORCH=OFF")
endif()

# --- c10d's ProcessGroupNCCL: only in a libtorch built with CUDA and NCCL. Its header is installed
# either way but compiles to nothing without USE_C10D_NCCL, which such a libtorch puts in the
# interface definitions of torch / torch_cpu / torch_cuda (1.13 and 2.x).
set(TRACERUN_WITH_TORCH_NCCL OFF)
if(TRACERUN_WITH_TORCH)
  set(_tracerun_torch_defs "")
  foreach(_t torch torch_cpu torch_cuda)
    if(TARGET ${_t})
      get_target_property(_d ${_t} INTERFACE_COMPILE_DEFINITIONS)
      if(_d)
        list(APPEND _tracerun_torch_defs ${_d})
      endif()
    endif()
  endforeach()
  if(TARGET torch_cuda OR TARGET c10_cuda OR CAFFE2_USE_CUDA)
    set(_tracerun_torch_cuda ON)
  else()
    set(_tracerun_torch_cuda OFF)
  endif()
  if(_tracerun_torch_cuda AND "USE_C10D_NCCL" IN_LIST _tracerun_torch_defs)
    tracerun_report(TORCH_NCCL ON "libtorch has CUDA and c10d NCCL: gpttrain --backend nccl")
  elseif(_tracerun_torch_cuda)
    tracerun_report(TORCH_NCCL OFF "libtorch has CUDA but was built without c10d NCCL")
  else()
    tracerun_report(TORCH_NCCL OFF "CPU-only libtorch: gpttrain uses Gloo")
  endif()
endif()

# --- libtorch with CUDA: the CUDA caching allocator's events (interpose/cuda/cuda_alloc_capture.cpp;
# its trace tracker needs libtorch >= 2.2, older ones compile to one line). Same detection as above.
set(TRACERUN_WITH_TORCH_CUDA OFF)
if(TRACERUN_WITH_TORCH AND _tracerun_torch_cuda)
  tracerun_report(TORCH_CUDA ON "libtorch ${Torch_VERSION} has CUDA: caching-allocator events")
elseif(TRACERUN_WITH_TORCH)
  tracerun_report(TORCH_CUDA OFF "CPU-only libtorch: no CUDA allocator events")
endif()

# --- CUDA toolkit, CUPTI, NCCL: headers and libraries only; no GPU is needed to compile.
set(TRACERUN_CUDA_ROOT "")
if(DEFINED ENV{CUDA_HOME} AND EXISTS "$ENV{CUDA_HOME}/include/cuda.h")
  set(TRACERUN_CUDA_ROOT "$ENV{CUDA_HOME}")
elseif(EXISTS "/usr/local/cuda/include/cuda.h")
  set(TRACERUN_CUDA_ROOT "/usr/local/cuda")
endif()
if(TRACERUN_WANT_CUDA AND TRACERUN_CUDA_ROOT)
  tracerun_report(CUDA ON "toolkit at ${TRACERUN_CUDA_ROOT}")
else()
  tracerun_report(CUDA OFF "no CUDA toolkit (CUDA_HOME or /usr/local/cuda)")
endif()

find_path(TRACERUN_CUPTI_INCLUDE cupti.h HINTS "${TRACERUN_CUDA_ROOT}/include"
          "${TRACERUN_CUDA_ROOT}/extras/CUPTI/include" NO_DEFAULT_PATH)
find_library(TRACERUN_CUPTI_LIBRARY cupti HINTS "${TRACERUN_CUDA_ROOT}/lib64"
             "${TRACERUN_CUDA_ROOT}/extras/CUPTI/lib64" NO_DEFAULT_PATH)
if(TRACERUN_WANT_CUPTI AND TRACERUN_WITH_CUDA AND TRACERUN_CUPTI_INCLUDE AND TRACERUN_CUPTI_LIBRARY)
  tracerun_report(CUPTI ON "${TRACERUN_CUPTI_LIBRARY}")
else()
  tracerun_report(CUPTI OFF "cupti.h / libcupti not found")
endif()

find_path(TRACERUN_NCCL_INCLUDE nccl.h HINTS "${TRACERUN_CUDA_ROOT}/include" /usr/include)
if(TRACERUN_WANT_NCCL AND TRACERUN_NCCL_INCLUDE)
  tracerun_report(NCCL ON "nccl.h in ${TRACERUN_NCCL_INCLUDE}")
else()
  tracerun_report(NCCL OFF "nccl.h not found")
endif()

# --- viewer: Debian's libimgui (static, GLFW + OpenGL3 backends inside), GLFW, OpenGL, stb
find_library(TRACERUN_IMGUI_LIBRARY imgui)
find_path(TRACERUN_IMGUI_INCLUDE imgui.h PATH_SUFFIXES imgui)
find_library(TRACERUN_GLFW_LIBRARY glfw)
find_library(TRACERUN_STB_LIBRARY stb)
find_package(OpenGL QUIET)
if(TRACERUN_WANT_VIEWER AND TRACERUN_IMGUI_LIBRARY AND TRACERUN_IMGUI_INCLUDE AND
   TRACERUN_GLFW_LIBRARY AND TRACERUN_STB_LIBRARY AND OpenGL_FOUND)
  tracerun_report(VIEWER ON "imgui ${TRACERUN_IMGUI_LIBRARY}")
else()
  tracerun_report(VIEWER OFF "needs libimgui-dev, libglfw3-dev, libstb-dev and OpenGL")
endif()

# --- Graphviz
if(PkgConfig_FOUND)
  pkg_check_modules(GVC QUIET IMPORTED_TARGET libgvc)
endif()
if(TRACERUN_WANT_DOT AND GVC_FOUND)
  tracerun_report(DOT ON "libgvc ${GVC_VERSION}")
else()
  tracerun_report(DOT OFF "libgvc not found (libgraphviz-dev)")
endif()

find_package(Catch2 QUIET)
if(Catch2_FOUND)
  tracerun_report(TESTS ON "Catch2 ${Catch2_VERSION}")
else()
  tracerun_report(TESTS OFF "Catch2 not found (catch2)")
endif()

include(TracerunTorch)

function(tracerun_print_summary)
  get_property(lines GLOBAL PROPERTY TRACERUN_SUMMARY)
  message(STATUS "tracerun configuration (${CMAKE_BUILD_TYPE}):")
  foreach(line IN LISTS lines)
    message(STATUS "${line}")
  endforeach()
endfunction()
