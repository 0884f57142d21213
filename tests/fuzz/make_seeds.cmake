# Writes the seed corpora of the scenario and config.json fuzz targets from
# files in the tree, at build time (nothing binary is committed):
#   scenario/   examples/*.toml and validation/*.toml (every scenario shape the
#               project documents or measures), plus one scenario per Hugging
#               Face fixture naming it with hf_config, so the scenario target
#               also reaches the config reader through the file it names;
#   hf_config/  tests/catalog/fixtures/*/config.json (every model_type read);
#   plugin_index/  an index of three libraries as the loader writes it, for
#               the host's plugin ABI (read from plugin_abi.h);
#   framework_profile/  plugins/frameworks/*/profile.toml as a bundle may ship
#               them: renamed "fuzz" (a profile's name is its file's stem, and
#               the target reads each input as fuzz.toml), without default and
#               default_for (a bundle's profile is never a default) and with
#               their aliases and built_on_it names renamed (the built-in profiles keep theirs); plus
#               one profile per built-in that extends it and reads a value;
#   gpu_catalog/  core/data/gpus.toml as a bundle may ship it: every table
#               renamed fuzz-<name> (a name already in the catalog is refused),
#               and a file of one GPU with a CUDA total.
# cmake -DSOURCE_DIR=<repository> -DSEEDS=<folder> -P make_seeds.cmake
foreach(variable SOURCE_DIR SEEDS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "make_seeds.cmake needs -D${variable}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${SEEDS}/scenario ${SEEDS}/hf_config ${SEEDS}/plugin_index ${SEEDS}/framework_profile
     ${SEEDS}/gpu_catalog)
file(MAKE_DIRECTORY ${SEEDS}/scenario ${SEEDS}/hf_config ${SEEDS}/plugin_index ${SEEDS}/framework_profile
     ${SEEDS}/gpu_catalog)

file(STRINGS ${SOURCE_DIR}/sdk/include/memplan/plugin_abi.h abi_lines REGEX "^#define MEMPLAN_ABI_M(AJ|IN)OR ")
string(REGEX REPLACE ".*MEMPLAN_ABI_MAJOR ([0-9]+).*" "\\1" abi_major "${abi_lines}")
string(REGEX REPLACE ".*MEMPLAN_ABI_MINOR ([0-9]+).*" "\\1" abi_minor "${abi_lines}")
file(WRITE ${SEEDS}/plugin_index/three-libraries.index
"memplan plugin index 1 abi ${abi_major}.${abi_minor}
folder /usr/lib/memplan/plugins
plugin 387016 1795668772042405329 5310212 1 adafactor memplan-adafactor.so
open 16392 1795668772042405329 5310213 memplan-old plugin.so
plugin 401176 1795668778302285834 5309039 4 zero memplan-zero.so
end
")

file(GLOB examples ${SOURCE_DIR}/examples/*.toml)
file(GLOB validation_cases ${SOURCE_DIR}/validation/*.toml)
file(COPY ${examples} DESTINATION ${SEEDS}/scenario)
foreach(case ${validation_cases})
  get_filename_component(name ${case} NAME)
  configure_file(${case} ${SEEDS}/scenario/validation-${name} COPYONLY)
endforeach()

file(GLOB configs ${SOURCE_DIR}/tests/catalog/fixtures/*/config.json)
foreach(config ${configs})
  get_filename_component(folder ${config} DIRECTORY)
  get_filename_component(model ${folder} NAME)
  configure_file(${config} ${SEEDS}/hf_config/${model}.json COPYONLY)
  # The fuzz targets resolve relative paths against examples/ (the folder of
  # the scenario name they parse under), as memplan run does for a scenario there.
  file(WRITE ${SEEDS}/scenario/hf-config-${model}.toml
"name = \"hf-config-${model}\"
mode = \"infer\"

[model]
hf_config = \"../tests/catalog/fixtures/${model}/config.json\"

[batch]
micro_batch = \"max\"
seq_len = 4096

[precision]
use = \"bf16\"

[activations]
use = \"inference\"

[hardware]
gpu = \"h100-sxm-80gb\"
")
endforeach()

file(GLOB profiles ${SOURCE_DIR}/plugins/frameworks/*/profile.toml)
foreach(profile ${profiles})
  get_filename_component(folder ${profile} DIRECTORY)
  get_filename_component(framework ${folder} NAME)
  file(READ ${profile} text)
  # Keys of [framework], one a line in every built-in profile. A profile
  # without a name line would make a seed that never loads: stop instead.
  string(REGEX REPLACE "\nname = \"[^\"\n]*\"" "\nname = \"fuzz\"" text "${text}")
  string(REGEX REPLACE "\n(default|default_for) = [^\n]*" "" text "${text}")
  string(REGEX REPLACE "\naliases = \\[[^]\n]*\\]" "\naliases = [\"fuzz-${framework}\"]" text "${text}")
  string(REGEX REPLACE "\nbuilt_on_it = \\[[^]\n]*\\]" "\nbuilt_on_it = [\"fuzz-tool-on-${framework}\"]" text
                       "${text}")
  if(NOT text MATCHES "\nname = \"fuzz\"")
    message(FATAL_ERROR "make_seeds.cmake: ${profile} has no line name = \"...\" in [framework] to rename")
  endif()
  file(WRITE ${SEEDS}/framework_profile/${framework}.toml "${text}")
  file(WRITE ${SEEDS}/framework_profile/extends-${framework}.toml
"[framework]
name = \"fuzz\"
aliases = [\"fuzz-on-${framework}\"]
built_on_it = [\"fuzz-recipe-on-${framework}\"]
summary = \"a script on top of ${framework}\"
version = \"1.0\"
source = \"tests/fuzz/make_seeds.cmake\"
extends = \"${framework}\"
extends_version = \"4.46\"

[readings.megatron]
cross_entropy = { unfused = \"vocab-parallel\" }

[defaults.lora]
rank = 8

[[since]]
version = \"1.1\"
gpu_name_contains = [\"h100\"]
[since.readings.megatron]
cross_entropy = { unfused = \"upcast-in-loss\" }
")
endforeach()

# The GPU catalog, renamed as a bundle's file must be; and a small file of one GPU with a CUDA total.
file(READ ${SOURCE_DIR}/core/data/gpus.toml gpus_text)
string(REGEX REPLACE "\n\\[" "\n[fuzz-" gpus_text "\n${gpus_text}")
file(WRITE ${SEEDS}/gpu_catalog/gpus.toml "${gpus_text}")
file(WRITE ${SEEDS}/gpu_catalog/one-gpu.toml
"[fuzz-x1-24gb]
label = \"Fuzz X1 24GB\"
memory_gib = 24
cuda_total_gib = 23.5
cuda_total_source = \"a made-up log\"
source = \"a made-up datasheet\"
tflops = { bf16 = 100, fp16 = 100 }
memory_bandwidth_gbs = 1000
")
