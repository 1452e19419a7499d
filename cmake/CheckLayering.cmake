# Fails when a source file includes a header from a folder its library may not
# depend on. Run on every build (target `layering`), before the libraries.
#
#   common  <-  config  <-  projections  <-  formats  <-  connectors  <-  daemon
#
# Usage: cmake -DSOURCE_DIR=<repo> -P cmake/CheckLayering.cmake
set(allowed_common      common)
set(allowed_config      common config)
set(allowed_projections common config projections)
set(allowed_formats     common config projections formats)
set(allowed_connectors  common config projections formats connectors)
set(allowed_daemon      common config projections formats connectors daemon)
set(layers common config projections formats connectors daemon)

set(violations "")
foreach(layer IN LISTS layers)
  file(GLOB_RECURSE sources "${SOURCE_DIR}/${layer}/*.h" "${SOURCE_DIR}/${layer}/*.cc")
  foreach(source IN LISTS sources)
    file(STRINGS "${source}" includes REGEX "^#include \"[a-z_]+/")
    foreach(line IN LISTS includes)
      string(REGEX REPLACE "^#include \"([a-z_]+)/.*" "\\1" folder "${line}")
      list(FIND layers "${folder}" is_layer)
      if(is_layer EQUAL -1)
        continue()
      endif()
      list(FIND allowed_${layer} "${folder}" ok)
      if(ok EQUAL -1)
        file(RELATIVE_PATH relative "${SOURCE_DIR}" "${source}")
        string(APPEND violations "  ${relative}: ${line} (${layer}/ may use: ${allowed_${layer}})\n")
      endif()
    endforeach()
  endforeach()
endforeach()
if(violations)
  message(FATAL_ERROR "layering violations:\n${violations}")
endif()
