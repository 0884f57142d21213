# ctest fixture: copy an out-of-tree CMake project to WORK and build it against
# the installed memplan in PREFIX, and nothing else: CMAKE_PREFIX_PATH is the
# prefix, the package registries are off, and the copy has no path back to
# memplan's source tree.
#   cmake -DSOURCE=<project> -DWORK=<folder> -DPREFIX=<prefix>
#         [-DCXX=<c++ compiler>] [-DCC=<c compiler>] -P build_project.cmake
# Builds in WORK/build with -j2 and no build type (no optimization: fastest).
foreach(var SOURCE WORK PREFIX)
  if(NOT ${var})
    message(FATAL_ERROR "build_project.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
# A user's own build/ folder in the example is not part of the project.
file(COPY ${SOURCE}/ DESTINATION ${WORK} PATTERN build EXCLUDE)

set(compilers)
if(CXX)
  list(APPEND compilers -DCMAKE_CXX_COMPILER=${CXX})
endif()
if(CC)
  list(APPEND compilers -DCMAKE_C_COMPILER=${CC})
endif()
execute_process(
  COMMAND ${CMAKE_COMMAND} -S ${WORK} -B ${WORK}/build
          -DCMAKE_PREFIX_PATH=${PREFIX}
          -DCMAKE_BUILD_TYPE=
          -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
          -DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF
          -DCMAKE_EXPORT_COMPILE_COMMANDS=ON
          ${compilers}
  RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "configuring ${WORK} against ${PREFIX} failed (${status})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK}/build -j2 RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "building ${WORK}/build failed (${status})")
endif()
