# Writes the seed corpora of the scenario and config.json fuzz targets from
# files in the tree, at build time (nothing binary is committed):
#   scenario/   examples/*.toml and validation/*.toml (every scenario shape the
#               project documents or measures), plus one scenario per Hugging
#               Face fixture naming it with hf_config, so the scenario target
#               also reaches the config reader through the file it names;
#   hf_config/  tests/catalog/fixtures/*/config.json (every model_type read);
#   plugin_index/  an index of three libraries as the loader writes it, for
#               the host's plugin ABI (read from plugin_abi.h).
# cmake -DSOURCE_DIR=<repository> -DSEEDS=<folder> -P make_seeds.cmake
foreach(variable SOURCE_DIR SEEDS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "make_seeds.cmake needs -D${variable}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${SEEDS}/scenario ${SEEDS}/hf_config ${SEEDS}/plugin_index)
file(MAKE_DIRECTORY ${SEEDS}/scenario ${SEEDS}/hf_config ${SEEDS}/plugin_index)

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
