# The HTML report (--format html, docs/html-report.md).
memplan_add_test(test_html_report report/html_report_test.cpp)
target_link_libraries(test_html_report PRIVATE nlohmann_json::nlohmann_json)

# The page rendered by headless Chromium (a test dependency: tools/bootstrap
# installs Debian's chromium). One ctest test of a few seconds, with a limit;
# it keeps report.html and its screenshot report.png in <build>/test-artifacts/.
add_executable(test_html_chromium report/html_chromium_test.cpp)
target_link_libraries(test_html_chromium PRIVATE memplan_test_support nlohmann_json::nlohmann_json GTest::gtest_main)
target_compile_definitions(test_html_chromium PRIVATE MEMPLAN_TEST_ARTIFACT_DIR="${CMAKE_BINARY_DIR}/test-artifacts")
add_test(NAME report.html_in_chromium COMMAND test_html_chromium)
set_tests_properties(report.html_in_chromium PROPERTIES TIMEOUT 60)
