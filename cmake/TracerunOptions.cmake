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
