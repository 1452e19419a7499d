# Tests that build and run containers with podman (scripts/containers.sh), labelled
# "containers":
#   ctest -L containers      only these (minutes: image builds, a Kafka broker...)
#   ctest -LE containers     everything else; the rest of the suite never needs them
# Each installs what it needs (podman, podman-compose, a debootstrap base image)
# on first use, runs alone (RUN_SERIAL: image builds want both cores) and exits 77,
# reported as skipped, where podman can neither be found nor installed.
find_program(DENORMD_BASH bash REQUIRED)

add_test(NAME containers.compose_stack
         COMMAND ${DENORMD_BASH} ${CMAKE_CURRENT_LIST_DIR}/../tests/containers/compose_stack_test.sh)
add_test(NAME containers.package
         COMMAND ${DENORMD_BASH} ${CMAKE_CURRENT_LIST_DIR}/../tests/containers/package_test.sh
                 ${CMAKE_BINARY_DIR})
set_tests_properties(containers.compose_stack containers.package PROPERTIES
  LABELS containers
  TIMEOUT 600
  SKIP_RETURN_CODE 77
  RUN_SERIAL TRUE)
