# ring/: Check suite, and the placement/Murmur3 oracle test against the
# DataStax Python driver (oracle_placement.py: the team's shared oracle,
# kept here so a clean clone tests on its own).
cassini_check_suite(test_ring LABEL unit SOURCES test_ring.c
                    LIBS cassini_ring)
# TIMEOUT: the allocator tests grow DCs to 9 nodes; under ASan on a loaded
# 2-core machine that alone takes over a minute.
cassini_check_suite(test_ring_alloc LABEL unit SOURCES test_ring_alloc.c
                    LIBS cassini_ring TIMEOUT 300)

add_executable(ring_oracle_cli ring_oracle_cli.c)
target_link_libraries(ring_oracle_cli PRIVATE cassini_ring)
add_test(NAME ring_oracle
         COMMAND ${SYSTEM_PYTHON3}
                 ${CMAKE_CURRENT_SOURCE_DIR}/ring_oracle_test.py
                 $<TARGET_FILE:ring_oracle_cli>
                 ${CMAKE_CURRENT_SOURCE_DIR}/oracle_placement.py)
set_tests_properties(ring_oracle PROPERTIES LABELS unit TIMEOUT 300)
