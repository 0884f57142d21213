# Docs that run (issue 13 item 7): each Markdown file with ```sh blocks is a
# ctest test, docs.<file>, that runs its blocks in order in a scratch folder
# mirroring the repository (tests/docs/run_doc_blocks.py says how, and how a
# block that cannot run in CI is marked and why). Included from
# tests/suites.cmake.
file(GLOB memplan_doc_files CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/docs/*.md)
foreach(doc ${memplan_doc_files})
  file(READ ${doc} doc_text)
  string(FIND "${doc_text}" "```sh" has_shell)
  if(has_shell EQUAL -1)
    continue()
  endif()
  get_filename_component(doc_name ${doc} NAME_WE)
  add_test(NAME docs.${doc_name}
    COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_SOURCE_DIR}/docs/run_doc_blocks.py ${doc} ${PROJECT_SOURCE_DIR}
            ${CMAKE_BINARY_DIR})
  set_tests_properties(docs.${doc_name} PROPERTIES TIMEOUT 600 LABELS docs)
endforeach()

# docs/validation.md's Results table and Index are generated from this tree's
# estimate (tools/validation-doc); a model change that moves a case fails here
# until the document is regenerated, so the published table never lies.
add_test(NAME docs.validation_current
  COMMAND ${Python3_EXECUTABLE} ${PROJECT_SOURCE_DIR}/tools/validation-doc --check --memplan $<TARGET_FILE:memplan>)
set_tests_properties(docs.validation_current PROPERTIES TIMEOUT 300 LABELS docs)
