# Writes the bundle fuzz target's seeds with the memplan commands a publisher
# runs (docs/bundles.md), so they are exactly what real bundles hold:
#   unsigned.toml  the manifest `bundle create` writes (two libraries, a data file);
#   signed.toml    the same after `bundle sign` wrote the key id into it;
#   bundle.sig     the signature file `bundle sign` wrote.
# The key pair is made for the purpose and thrown away with the work folder.
# cmake -DMEMPLAN=<memplan> -DPLUGIN_DIR=<plugins> -DSOURCE_DIR=<repository>
#       -DWORK=<scratch folder> -DSEEDS=<folder> -P make_bundle_seeds.cmake
foreach(variable MEMPLAN PLUGIN_DIR SOURCE_DIR WORK SEEDS)
  if(NOT DEFINED ${variable})
    message(FATAL_ERROR "make_bundle_seeds.cmake needs -D${variable}=...")
  endif()
endforeach()

file(REMOVE_RECURSE ${WORK} ${SEEDS}/bundle)
file(MAKE_DIRECTORY ${WORK}/data ${WORK}/home ${SEEDS}/bundle)
file(COPY ${SOURCE_DIR}/examples/llama2-7b-single-gpu.toml DESTINATION ${WORK}/data)

# memplan <args...> with the store in the work folder, failing the build on error.
function(memplan_step)
  execute_process(COMMAND ${CMAKE_COMMAND} -E env MEMPLAN_HOME=${WORK}/home ${MEMPLAN} ${ARGN}
                  RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT status EQUAL 0)
    message(FATAL_ERROR "memplan ${ARGN} failed (${status}):\n${out}${err}")
  endif()
endfunction()

memplan_step(bundle keygen --out ${WORK}/seed-key.pem)
memplan_step(bundle create ${WORK}/bundle --name fuzz-seed --version 1.2.3 --publisher "memplan fuzz seeds"
             --library ${PLUGIN_DIR}/memplan-adamw.so --library ${PLUGIN_DIR}/memplan-zero.so --data ${WORK}/data)
configure_file(${WORK}/bundle/bundle.toml ${SEEDS}/bundle/unsigned.toml COPYONLY)
memplan_step(bundle sign ${WORK}/bundle --key ${WORK}/seed-key.pem)
configure_file(${WORK}/bundle/bundle.toml ${SEEDS}/bundle/signed.toml COPYONLY)
configure_file(${WORK}/bundle/bundle.sig ${SEEDS}/bundle/bundle.sig COPYONLY)
# A repository index (the bundle fuzzer reads each input as an index too).
memplan_step(bundle publish ${WORK}/bundle --to ${WORK}/repository)
configure_file(${WORK}/repository/index.toml ${SEEDS}/bundle/index.toml COPYONLY)
file(REMOVE_RECURSE ${WORK})
