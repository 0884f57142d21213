# memplan_add_plugin: build one memplan plugin library.
#
#   memplan_add_plugin(<name> SOURCES <file>...
#                      [OUTPUT_DIRECTORY <dir>]
#                      [INSTALL_DESTINATION <dir>] [COMPONENT <component>] [NO_INSTALL])
#
# Makes the MODULE library target memplan-plugin-<name>, file memplan-<name>.so,
# the name the memplan loader looks for. One library is one plugin; <name> is
# normally the name in the plugin's PluginInfo (lower-case letters, digits and
# dashes, starting with a letter: the loader's rule for plugin names).
#
# The library:
#   - links memplan::sdk (the header-only SDK) and nothing of memplan's core:
#     a plugin calls the host only through the function table it is handed;
#   - has hidden visibility, so its one exported symbol is the entry point that
#     MEMPLAN_PLUGIN(...) marks for export;
#   - links with -Wl,--no-undefined, so a symbol the plugin expects from the host
#     fails the build instead of the load. Set the variable
#     MEMPLAN_PLUGIN_NO_UNDEFINED to OFF to drop it where undefined symbols are
#     expected: a clang sanitizer build, whose plugins get the sanitizer runtime
#     from the executable that loads them (memplan's MEMPLAN_FUZZ build does so).
#
# OUTPUT_DIRECTORY: where the build puts the library. Default: the variable
#   MEMPLAN_PLUGIN_OUTPUT_DIR when set, otherwise CMake's default (the build
#   folder of the calling CMakeLists.txt).
# INSTALL_DESTINATION: where `cmake --install` puts it. Default:
#   lib/memplan/plugins under the install prefix; installed into the prefix of
#   memplan itself, that is the folder the memplan binary loads its plugins
#   from. memplan_PLUGIN_DIR (set by find_package(memplan)) names that folder
#   of the memplan that was found.
# COMPONENT: the install component (default: CMake's default component).
# NO_INSTALL: add no install rule. Setting the variable MEMPLAN_PLUGIN_INSTALL
#   to OFF does the same for every call without an INSTALL_DESTINATION (the
#   memplan tree does this for its test plugins).
#
# This file is installed with memplan's CMake package and included by
# memplanConfig.cmake, and the memplan tree builds its built-in plugins with it.
include_guard(GLOBAL)

function(memplan_add_plugin name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "NO_INSTALL" "OUTPUT_DIRECTORY;INSTALL_DESTINATION;COMPONENT" "SOURCES")
  if(ARG_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "memplan_add_plugin(${name}): unknown arguments '${ARG_UNPARSED_ARGUMENTS}'; "
                        "the accepted ones are SOURCES, OUTPUT_DIRECTORY, INSTALL_DESTINATION, COMPONENT and NO_INSTALL")
  endif()
  if(NOT name MATCHES "^[a-z][a-z0-9-]*$" OR name MATCHES "-$")
    message(FATAL_ERROR "memplan_add_plugin(${name}): '${name}' is not a valid plugin name (rule: lower-case "
                        "letters, digits and dashes, starting with a letter and not ending with a dash, e.g. my-optimizer)")
  endif()
  if(NOT ARG_SOURCES)
    message(FATAL_ERROR "memplan_add_plugin(${name}): no SOURCES; name the plugin's .cpp files, "
                        "e.g. memplan_add_plugin(${name} SOURCES plugin.cpp)")
  endif()
  if(NOT TARGET memplan::sdk)
    message(FATAL_ERROR "memplan_add_plugin(${name}): the target memplan::sdk does not exist; "
                        "call find_package(memplan CONFIG REQUIRED) first")
  endif()

  set(target memplan-plugin-${name})
  add_library(${target} MODULE ${ARG_SOURCES})
  target_link_libraries(${target} PRIVATE memplan::sdk)
  set_target_properties(${target} PROPERTIES
    PREFIX ""
    OUTPUT_NAME memplan-${name}
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON)
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${ARG_OUTPUT_DIRECTORY})
  elseif(MEMPLAN_PLUGIN_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${MEMPLAN_PLUGIN_OUTPUT_DIR})
  endif()
  if(NOT APPLE AND (NOT DEFINED MEMPLAN_PLUGIN_NO_UNDEFINED OR MEMPLAN_PLUGIN_NO_UNDEFINED))
    target_link_options(${target} PRIVATE -Wl,--no-undefined)
  endif()

  set(install ON)
  if(ARG_NO_INSTALL OR (DEFINED MEMPLAN_PLUGIN_INSTALL AND NOT MEMPLAN_PLUGIN_INSTALL AND NOT ARG_INSTALL_DESTINATION))
    set(install OFF)
  endif()
  if(install)
    set(destination lib/memplan/plugins)
    if(ARG_INSTALL_DESTINATION)
      set(destination ${ARG_INSTALL_DESTINATION})
    endif()
    set(component)
    if(ARG_COMPONENT)
      set(component COMPONENT ${ARG_COMPONENT})
    endif()
    install(TARGETS ${target} LIBRARY DESTINATION ${destination} ${component})
  endif()
endfunction()
