# The installed SDK (issue 5): memplan installed to a temporary prefix, the
# out-of-tree example plugins (examples/plugins/) built against that prefix
# only and run through the installed CLI, plugins built by clang loaded into
# the g++-built memplan (and a g++ plugin in a clang-built C host), versions
# refused by the CMake package and by the loader, and the CPack packages.
# Included from tests/suites.cmake.
#
# ctest fixtures set the stage, in order; the GoogleTest cases in
# install/install_test.cpp check the results:
#   install.prefix             cmake --install <build> --prefix <work>/prefix
#   install.build.<project>    a copy of each project configured and built against the prefix
#   install.cpack              cpack -G "DEB;TGZ" into <work>/packages
# Everything goes under build/tests/install-suite/.
set(install_suite_dir ${CMAKE_CURRENT_BINARY_DIR}/install-suite)
set(install_prefix ${install_suite_dir}/prefix)

add_test(NAME install.prefix
  COMMAND ${CMAKE_COMMAND} -DBUILD_DIR=${CMAKE_BINARY_DIR} -DPREFIX=${install_prefix}
          -P ${CMAKE_CURRENT_LIST_DIR}/install_prefix.cmake)
set_tests_properties(install.prefix PROPERTIES FIXTURES_SETUP memplan_install_prefix LABELS install)

# install_suite_build(NAME SOURCE [CXX compiler] [CC compiler]): builds a copy
# of SOURCE in <work>/NAME.
function(install_suite_build name source)
  cmake_parse_arguments(ARG "" "CXX;CC" "" ${ARGN})
  set(compilers)
  if(ARG_CXX)
    list(APPEND compilers -DCXX=${ARG_CXX})
  endif()
  if(ARG_CC)
    list(APPEND compilers -DCC=${ARG_CC})
  endif()
  add_test(NAME install.build.${name}
    COMMAND ${CMAKE_COMMAND} -DSOURCE=${source} -DWORK=${install_suite_dir}/${name} -DPREFIX=${install_prefix}
            ${compilers} -P ${CMAKE_CURRENT_LIST_DIR}/build_project.cmake)
  set_tests_properties(install.build.${name} PROPERTIES
    FIXTURES_REQUIRED memplan_install_prefix FIXTURES_SETUP memplan_install_suite LABELS install)
endfunction()

# The examples with the compiler that built memplan.
install_suite_build(adan-optimizer ${PROJECT_SOURCE_DIR}/examples/plugins/adan-optimizer CXX ${CMAKE_CXX_COMPILER})
install_suite_build(activation-offload ${PROJECT_SOURCE_DIR}/examples/plugins/activation-offload
                    CXX ${CMAKE_CXX_COMPILER})
# Across toolchains: the Adan example built by clang++ for the memplan that
# g++ built; a C host built by clang for the g++-built plugin.
find_program(MEMPLAN_TEST_CLANGXX NAMES clang++ DOC "clang++ for the cross-compiler plugin tests")
find_program(MEMPLAN_TEST_CLANG NAMES clang DOC "clang for the cross-compiler host test")
set(install_clangxx "")
set(install_clang "")
if(MEMPLAN_TEST_CLANGXX AND MEMPLAN_TEST_CLANG)
  set(install_clangxx ${MEMPLAN_TEST_CLANGXX})
  set(install_clang ${MEMPLAN_TEST_CLANG})
  install_suite_build(adan-optimizer-clang ${PROJECT_SOURCE_DIR}/examples/plugins/adan-optimizer CXX ${install_clangxx})
  install_suite_build(mini-host-clang ${CMAKE_CURRENT_LIST_DIR}/mini-host CC ${install_clang})
else()
  message(STATUS "clang/clang++ not found: the install suite skips its cross-compiler tests")
endif()

add_test(NAME install.cpack
  COMMAND ${CMAKE_COMMAND} -E chdir ${CMAKE_BINARY_DIR}
          ${CMAKE_CPACK_COMMAND} --config ${CMAKE_BINARY_DIR}/CPackConfig.cmake -G "DEB;TGZ"
          -B ${install_suite_dir}/packages)
set_tests_properties(install.cpack PROPERTIES FIXTURES_SETUP memplan_install_suite LABELS install)

add_executable(test_install install/install_test.cpp)
target_link_libraries(test_install PRIVATE memplan_test_support GTest::gtest_main nlohmann_json::nlohmann_json)
target_compile_definitions(test_install PRIVATE
  INSTALL_SUITE_DIR="${install_suite_dir}"
  INSTALL_PREFIX="${install_prefix}"
  INSTALL_CMAKE="${CMAKE_COMMAND}"
  INSTALL_HOST_CXX="${CMAKE_CXX_COMPILER}"
  INSTALL_HOST_CXX_ID="${CMAKE_CXX_COMPILER_ID}"
  INSTALL_CLANGXX="${install_clangxx}"
  INSTALL_RELEASE="${PROJECT_VERSION}"
  INSTALL_SDK_VERSION="${MEMPLAN_SDK_VERSION}"
  INSTALL_SANITIZED=$<BOOL:${MEMPLAN_SANITIZE}>)
gtest_discover_tests(test_install DISCOVERY_TIMEOUT 60
  PROPERTIES FIXTURES_REQUIRED memplan_install_suite LABELS install)
