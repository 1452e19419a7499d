# Install rules and the Debian package of denormd.
#
#   cmake --install build                      # prefix /usr/local by default
#   cmake --install build --prefix /usr        # where the package puts things
#   DESTDIR=/tmp/stage cmake --install build   # staged, without root
#   (cd build && cpack -G DEB)                 # build/denormd_<version>_<arch>.deb
#
# What goes where (PREFIX = the install prefix):
#   PREFIX/bin/denormd
#   PREFIX/share/man/man1/denormd.1.gz                 docs/denormd.1
#   PREFIX/share/doc/denormd/configuration.md          docs/configuration.md
#   /etc/denormd/denormd.yaml                          deploy/denormd.yaml (example)
#   /etc/denormd/denormd.env  (mode 0600)              deploy/denormd.env
#   PREFIX/lib/systemd/system/denormd.service          deploy/systemd/denormd.service,
#                                                      its /usr/bin and /etc/denormd
#                                                      paths rewritten to the real ones
#   PREFIX/lib/sysusers.d/denormd.conf                 deploy/systemd/denormd.sysusers
# The configuration directory is absolute (DENORMD_CONF_DIR, default /etc/denormd)
# whatever the prefix, as services expect it there.
#
# The package: its Depends come from dpkg-shlibdeps on the binary (Debian's
# runtime libraries: libpqxx-6.4, librdkafka++1, libyaml-cpp0.7, libstdc++6, ...;
# an explicit list when dpkg-shlibdeps is missing), plus procps for the unit's
# /bin/kill; postinst creates the system
# user denormd (systemd-sysusers, else useradd); the two /etc files are
# conffiles. Nothing is enabled or started at install.
include(GNUInstallDirs)

set(DENORMD_CONF_DIR "/etc/denormd" CACHE PATH
    "Absolute directory of the service's configuration (denormd.yaml, denormd.env)")
set(DENORMD_SOURCE_ROOT "${CMAKE_CURRENT_LIST_DIR}/..")

install(TARGETS denormd RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Debian wants man pages gzipped, reproducibly (-n: no name or time stamp).
add_custom_command(
  OUTPUT ${CMAKE_CURRENT_BINARY_DIR}/denormd.1.gz
  COMMAND gzip -9n -c ${DENORMD_SOURCE_ROOT}/docs/denormd.1 > ${CMAKE_CURRENT_BINARY_DIR}/denormd.1.gz
  DEPENDS ${DENORMD_SOURCE_ROOT}/docs/denormd.1
  COMMENT "Compressing the man page")
add_custom_target(denormd_man ALL DEPENDS ${CMAKE_CURRENT_BINARY_DIR}/denormd.1.gz)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/denormd.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${DENORMD_SOURCE_ROOT}/docs/configuration.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

install(FILES ${DENORMD_SOURCE_ROOT}/deploy/denormd.yaml DESTINATION ${DENORMD_CONF_DIR})
install(FILES ${DENORMD_SOURCE_ROOT}/deploy/denormd.env DESTINATION ${DENORMD_CONF_DIR}
        PERMISSIONS OWNER_READ OWNER_WRITE)
install(FILES ${DENORMD_SOURCE_ROOT}/deploy/systemd/denormd.sysusers
        DESTINATION lib/sysusers.d RENAME denormd.conf)

# The unit names /usr/bin/denormd and /etc/denormd; rewritten at install time,
# when the prefix is known (cmake --install --prefix, CPack's /usr).
install(CODE "
  set(_denormd_unit_source [[${DENORMD_SOURCE_ROOT}/deploy/systemd/denormd.service]])
  set(_denormd_unit_output [[${CMAKE_CURRENT_BINARY_DIR}/denormd.service]])
  set(_denormd_bindir [[${CMAKE_INSTALL_BINDIR}]])
  set(_denormd_conf_dir [[${DENORMD_CONF_DIR}]])")
install(CODE [[
  file(READ "${_denormd_unit_source}" _denormd_unit)
  string(REPLACE "/usr/bin/denormd" "${CMAKE_INSTALL_PREFIX}/${_denormd_bindir}/denormd"
         _denormd_unit "${_denormd_unit}")
  string(REPLACE "/etc/denormd" "${_denormd_conf_dir}" _denormd_unit "${_denormd_unit}")
  file(WRITE "${_denormd_unit_output}" "${_denormd_unit}")
  file(INSTALL DESTINATION "${CMAKE_INSTALL_PREFIX}/lib/systemd/system" TYPE FILE
       FILES "${_denormd_unit_output}")
]])

# --- CPack: the .deb -------------------------------------------------------------
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME denormd)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "denormd developers")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "keeps denormalized read documents in PostgreSQL right as Kafka change events arrive")
set(CPACK_PACKAGE_DESCRIPTION
    "denormd consumes entity change events from Apache Kafka, keeps the normalized
source entities in PostgreSQL and maintains denormalized read documents in plain
PostgreSQL tables, each batch in one transaction. The package installs the daemon,
its man page, an example configuration in /etc/denormd and a systemd unit
(not enabled).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION database)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# procps: /bin/kill, for the unit's ExecReload.
set(CPACK_DEBIAN_PACKAGE_DEPENDS "procps")
find_program(DENORMD_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(DENORMD_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)  # added to the Depends above
else()
  # Debian bookworm's runtime libraries of what CMakeLists.txt links.
  string(APPEND CPACK_DEBIAN_PACKAGE_DEPENDS
         ", libpqxx-6.4, librdkafka++1, libyaml-cpp0.7, libstdc++6, libgcc-s1, libc6")
endif()
file(WRITE ${CMAKE_CURRENT_BINARY_DIR}/debian/conffiles
     "${DENORMD_CONF_DIR}/denormd.yaml\n${DENORMD_CONF_DIR}/denormd.env\n")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${DENORMD_SOURCE_ROOT}/deploy/debian/postinst
    ${DENORMD_SOURCE_ROOT}/deploy/debian/prerm
    ${DENORMD_SOURCE_ROOT}/deploy/debian/postrm
    ${CMAKE_CURRENT_BINARY_DIR}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_OUTPUT_FILE_PREFIX ${CMAKE_CURRENT_BINARY_DIR})
include(CPack)
