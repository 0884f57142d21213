# ctest fixture: a fresh install of the build tree into a temporary prefix.
#   cmake -DBUILD_DIR=<build> -DPREFIX=<prefix> -P install_prefix.cmake
foreach(var BUILD_DIR PREFIX)
  if(NOT ${var})
    message(FATAL_ERROR "install_prefix.cmake needs -D${var}=...")
  endif()
endforeach()
file(REMOVE_RECURSE ${PREFIX})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${PREFIX} RESULT_VARIABLE status)
if(NOT status EQUAL 0)
  message(FATAL_ERROR "cmake --install ${BUILD_DIR} --prefix ${PREFIX} failed (${status})")
endif()
