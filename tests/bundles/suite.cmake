# Bundles (issue 5, part B): create, keygen, sign, verify, install, list,
# remove, the trust store, and the load-time checks. The test plugins are
# built into their own folders (never the built-in plugin folder), so only a
# bundle can bring them into `memplan run`. Included from tests/suites.cmake;
# paths are relative to tests/.
set(bundle_plugins_dir ${CMAKE_CURRENT_BINARY_DIR}/bundles/plugins)

# bundle_test_plugin(NAME PLUGIN_NAME STATES): memplan-<NAME>.so in plugins/<NAME>/.
function(bundle_test_plugin name plugin_name states)
  memplan_add_plugin(${name} SOURCES ${CMAKE_CURRENT_LIST_DIR}/plugins/states.cpp
                     OUTPUT_DIRECTORY ${bundle_plugins_dir}/${name})
  target_compile_definitions(memplan-plugin-${name} PRIVATE BUNDLE_PLUGIN_NAME="${plugin_name}" BUNDLE_STATES=${states})
endfunction()

bundle_test_plugin(bundle-alpha bundle-alpha 5)
bundle_test_plugin(bundle-beta bundle-beta 7)
bundle_test_plugin(bundle-alpha-twin bundle-alpha 5)  # another library offering 'bundle-alpha'
# Another 'bundle-alpha' with 11 states, so a run shows whose library took the name (issue 14 finding 6).
bundle_test_plugin(bundle-alpha-impostor bundle-alpha 11)

# The tests check signatures and key ids with libcrypto directly, not through
# the core's own crypto code.
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
memplan_add_test(test_bundles bundles/bundle_test.cpp)
target_link_libraries(test_bundles PRIVATE OpenSSL::Crypto)
add_dependencies(test_bundles memplan-plugin-bundle-alpha memplan-plugin-bundle-beta memplan-plugin-bundle-alpha-twin
                 memplan-plugin-bundle-alpha-impostor)
target_compile_definitions(test_bundles PRIVATE
  BUNDLE_ALPHA_LIBRARY="${bundle_plugins_dir}/bundle-alpha/memplan-bundle-alpha.so"
  BUNDLE_BETA_LIBRARY="${bundle_plugins_dir}/bundle-beta/memplan-bundle-beta.so"
  BUNDLE_TWIN_LIBRARY="${bundle_plugins_dir}/bundle-alpha-twin/memplan-bundle-alpha-twin.so"
  BUNDLE_IMPOSTOR_LIBRARY="${bundle_plugins_dir}/bundle-alpha-impostor/memplan-bundle-alpha-impostor.so")

# Repositories (issue 14): publish, serve with Python's http.server on
# 127.0.0.1, add, install by name, upgrade, pin, key scoping.
memplan_add_test(test_repositories bundles/repository_test.cpp)
target_link_libraries(test_repositories PRIVATE OpenSSL::Crypto)
add_dependencies(test_repositories memplan-plugin-bundle-alpha memplan-plugin-bundle-beta)
target_compile_definitions(test_repositories PRIVATE
  BUNDLE_ALPHA_LIBRARY="${bundle_plugins_dir}/bundle-alpha/memplan-bundle-alpha.so"
  BUNDLE_BETA_LIBRARY="${bundle_plugins_dir}/bundle-beta/memplan-bundle-beta.so")
