# The in-process tests again, under AddressSanitizer and UBSan, in a build
# directory of their own (tests/sanitize/in_process_test.sh), labelled
# "sanitize":
#   ctest -L sanitize      only this (minutes: a second build of everything)
#   ctest -LE sanitize     everything else
# Not registered inside a sanitized build itself.
if(NOT DENORMD_SANITIZE)
  find_program(DENORMD_BASH bash REQUIRED)
  add_test(NAME sanitize.in_process
           COMMAND ${DENORMD_BASH} ${CMAKE_CURRENT_LIST_DIR}/../tests/sanitize/in_process_test.sh
                   ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}/sanitize)
  set_tests_properties(sanitize.in_process PROPERTIES
    LABELS sanitize
    TIMEOUT 3000
    RUN_SERIAL TRUE)
endif()
