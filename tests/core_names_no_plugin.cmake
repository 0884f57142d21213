# Fails if a core source names a particular built-in plugin: the core knows
# plugin kinds and phases, never a specific optimizer, precision, activation
# model, strategy or framework profile. The names are the plugin folders
# (plugins/<kind>/<name>/), so a new plugin is guarded without editing this
# file. A name is matched as a whole word anywhere, unless it is also an
# ordinary English word the core uses in its own sense ("zero", "offload"):
# such a name is matched only when quoted ("zero" or 'zero'), as a scenario
# value would be. "none" (a plugin, and the core's word for absence) is not
# matched at all. Task files (plugins/tasks/<name>/) count as plugins: the
# core names no task either.
file(GLOB plugin_folders LIST_DIRECTORIES true ${PLUGINS_DIR}/*/*)
set(words "")
foreach(folder ${plugin_folders})
  if(IS_DIRECTORY ${folder})
    get_filename_component(name ${folder} NAME)
    list(APPEND words ${name})
  endif()
endforeach()
list(LENGTH words plugin_count)
if(plugin_count LESS 30)
  message(FATAL_ERROR "found only ${plugin_count} plugin folders under ${PLUGINS_DIR}; is PLUGINS_DIR right?")
endif()
# Other spellings of plugins and of their option values.
list(APPEND words zero-3 zero3)
set(english zero offload freeze allocator inference ratio paper quantized lion recompute serve)
set(ignored none)
set(quoted selective full)
foreach(name ${english})
  list(REMOVE_ITEM words ${name})
  list(APPEND quoted ${name})
endforeach()
# The other names framework profiles answer to ([framework] aliases and
# built_on_it): matched when quoted, since several are ordinary words in the
# core's comments ("torch", "transformers") but a quoted one would be a
# scenario value the core picks out.
file(GLOB profile_files ${PLUGINS_DIR}/frameworks/*/profile.toml)
foreach(profile ${profile_files})
  file(STRINGS ${profile} alias_lines REGEX "^(aliases|built_on_it) = ")
  foreach(line ${alias_lines})
    string(REGEX MATCHALL "\"[a-z0-9._-]+\"" names "${line}")
    foreach(name ${names})
      string(REPLACE "\"" "" name ${name})
      list(APPEND quoted ${name})
    endforeach()
  endforeach()
endforeach()
list(REMOVE_ITEM words ${ignored})

file(GLOB_RECURSE sources ${CORE_DIR}/src/*.cpp ${CORE_DIR}/src/*.hpp ${CORE_DIR}/include/*.hpp ${CORE_DIR}/bundle/*.cpp
     ${CORE_DIR}/bundle/*.hpp ${CORE_DIR}/cli/*.cpp ${CORE_DIR}/python/*.cpp
     ${CORE_DIR}/cli/*.hpp)
set(found "")
foreach(source ${sources})
  file(READ ${source} text)
  string(TOLOWER "${text}" text)
  foreach(name ${words})
    string(REGEX MATCH "(^|[^a-z0-9_-])${name}([^a-z0-9_-]|$)" hit "${text}")
    if(hit)
      list(APPEND found "${source}: ${name}")
    endif()
  endforeach()
  foreach(name ${quoted})
    string(REGEX MATCH "(\"${name}\"|'${name}')" hit "${text}")
    if(hit)
      list(APPEND found "${source}: \"${name}\"")
    endif()
  endforeach()
endforeach()
list(LENGTH sources checked)
if(found)
  string(REPLACE ";" "\n  " found "${found}")
  message(FATAL_ERROR "the core names specific plugins:\n  ${found}")
endif()
message(STATUS "core names none of ${plugin_count} plugins (${checked} files checked)")
