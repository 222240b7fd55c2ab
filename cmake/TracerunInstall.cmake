# What `cmake --install` and `cpack -G DEB` put where: the commands, libtracerun.so, the public
# headers (the annotation API; the trace reader and analyses) and a CMake package, so that a user's
# project says find_package(tracerun) and links tracerun::trace (reading traces: core + trace +
# SQLite, no libtorch) or tracerun::annotate (annotations: the header + libtorch). Not a build of
# anything: included last by the top-level CMakeLists.txt, after every target exists.
#
# Layout under the prefix (the launcher finds libtracerun.so at ../lib beside its own binary):
#   bin/tracerun bin/gpttrain bin/tracedot bin/traceview     lib/libtracerun.so lib/libtracerun_nccl.so
#   lib/tracerun-python/sitecustomize.py (the Python module hooks)
#   lib/libtracerun_{core,trace}.a                           include/tracerun/{core,trace}/... annotate*.h
#   lib/cmake/tracerun/tracerunConfig.cmake (+ Version, Targets)
include(CMakePackageConfigHelpers)

set(TRACERUN_INSTALL_CMAKEDIR lib/cmake/tracerun)

set_target_properties(tracerun_core PROPERTIES EXPORT_NAME core)
set_target_properties(tracerun_trace PROPERTIES EXPORT_NAME trace)
if(TARGET tracerun_annotate)
  set_target_properties(tracerun_annotate PROPERTIES EXPORT_NAME annotate)
endif()

# Reading traces: tracerun::trace (static, with tracerun::core behind it).
install(TARGETS tracerun_core tracerun_trace EXPORT tracerunTraceTargets
        ARCHIVE DESTINATION lib)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/core/include/ ${PROJECT_SOURCE_DIR}/trace/include/
        DESTINATION include FILES_MATCHING PATTERN "*.h")
install(EXPORT tracerunTraceTargets NAMESPACE tracerun:: FILE tracerunTraceTargets.cmake
        DESTINATION ${TRACERUN_INSTALL_CMAKEDIR})

# Annotating a libtorch program: the header-only tracerun::annotate (libtorch from the user's own
# find_package(Torch), done by tracerunConfig.cmake), and the capture library the launcher preloads.
if(TARGET tracerun_annotate)
  install(TARGETS tracerun_annotate EXPORT tracerunAnnotateTargets)
  # annotate.h includes annotate_abi.h and tracerun/core/vocabulary.h (installed with core above).
  install(FILES ${PROJECT_SOURCE_DIR}/interpose/include/tracerun/annotate.h
                ${PROJECT_SOURCE_DIR}/interpose/include/tracerun/annotate_abi.h
          DESTINATION include/tracerun)
  install(EXPORT tracerunAnnotateTargets NAMESPACE tracerun:: FILE tracerunAnnotateTargets.cmake
          DESTINATION ${TRACERUN_INSTALL_CMAKEDIR})
endif()

foreach(_program tracerun gpttrain tracedot traceview)
  if(TARGET ${_program})
    install(TARGETS ${_program} RUNTIME DESTINATION bin)
  endif()
endforeach()
foreach(_library tracerun_capture tracerun_nccl)
  if(TARGET ${_library})
    install(TARGETS ${_library} LIBRARY DESTINATION lib)
  endif()
endforeach()
if(TARGET tracerun_capture)  # the Python module hooks, at lib/tracerun-python beside the library
  install(FILES ${PROJECT_SOURCE_DIR}/interpose/python/sitecustomize.py
                ${PROJECT_SOURCE_DIR}/interpose/python/_tracerun_training.py
                ${PROJECT_SOURCE_DIR}/interpose/python/_tracerun_groups.py
          DESTINATION lib/tracerun-python)
endif()

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tracerunConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tracerunConfig.cmake INSTALL_DESTINATION ${TRACERUN_INSTALL_CMAKEDIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tracerunConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tracerunConfig.cmake
              ${PROJECT_BINARY_DIR}/tracerunConfigVersion.cmake
        DESTINATION ${TRACERUN_INSTALL_CMAKEDIR})

# The Debian package: `cpack -G DEB` in the build directory (scripts/package-deb.sh). Depends are
# computed by dpkg-shlibdeps from what the installed binaries really link.
set(CPACK_PACKAGE_NAME tracerun)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "tracerun developers <tracerun@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "records and shows what a parallel libtorch training job does")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_STRIP_FILES ON)  # the build keeps debug info; the package does not
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
# dpkg-shlibdeps must find the libraries our own binaries link (libtracerun.so is in the package).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/interpose)
include(CPack)
