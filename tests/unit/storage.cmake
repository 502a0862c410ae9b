# Storage unit suites. Each stays well under a minute under ASan.
cassini_check_suite(test_storage_model LABEL unit
                    SOURCES test_storage_model.c LIBS cassini_storage)
cassini_check_suite(test_storage_types LABEL unit
                    SOURCES test_storage_types.c LIBS cassini_storage)
cassini_check_suite(test_storage_values LABEL unit
                    SOURCES test_storage_values.c LIBS cassini_storage)
cassini_check_suite(test_storage_memtable LABEL unit
                    SOURCES test_storage_memtable.c LIBS cassini_storage)
add_library(cassini_storage_testenv STATIC storage_fault_env.c)
target_link_libraries(cassini_storage_testenv PUBLIC cassini_common)
# The engine fixture over the fault env (storage_fixture.h).
add_library(cassini_storage_fixture STATIC storage_fixture.c)
target_link_libraries(cassini_storage_fixture PUBLIC cassini_storage
                      cassini_storage_testenv cassini_testlib)
cassini_check_suite(test_storage_commitlog LABEL unit
                    SOURCES test_storage_commitlog.c
                    LIBS cassini_storage cassini_storage_testenv cassini_conf)
cassini_check_suite(test_storage_engine LABEL unit
                    SOURCES test_storage_engine.c
                    LIBS cassini_storage_fixture cassini_conf)
cassini_check_suite(test_storage_tombstones LABEL unit
                    SOURCES test_storage_tombstones.c
                    LIBS cassini_storage_fixture cassini_conf)
cassini_check_suite(test_storage_leveled LABEL unit TIMEOUT 300
                    SOURCES test_storage_leveled.c
                    LIBS cassini_storage cassini_storage_testenv cassini_conf)
cassini_check_suite(test_storage_random LABEL unit
                    SOURCES test_storage_random.c
                    LIBS cassini_storage cassini_storage_testenv cassini_conf)
cassini_check_suite(test_storage_read_path LABEL unit
                    SOURCES test_storage_read_path.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_corrupt LABEL unit
                    SOURCES test_storage_corrupt.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_fragment LABEL unit
                    SOURCES test_storage_fragment.c
                    LIBS cassini_storage cassini_storage_testenv cassini_conf)
cassini_check_suite(test_storage_truncate LABEL unit
                    SOURCES test_storage_truncate.c
                    LIBS cassini_storage_fixture cassini_conf)
cassini_check_suite(test_storage_fragment_rows LABEL unit
                    SOURCES test_storage_fragment_rows.c LIBS cassini_storage)
cassini_check_suite(test_storage_alter LABEL unit
                    SOURCES test_storage_alter.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_drop LABEL unit
                    SOURCES test_storage_drop.c
                    LIBS cassini_storage_fixture cassini_conf)
cassini_check_suite(test_storage_type_tree LABEL unit
                    SOURCES test_storage_type_tree.c LIBS cassini_storage)
cassini_check_suite(test_storage_counter LABEL unit
                    SOURCES test_storage_counter.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_sai LABEL unit
                    SOURCES test_storage_sai.c LIBS cassini_storage)
cassini_check_suite(test_storage_sai_terms LABEL unit
                    SOURCES test_storage_sai_terms.c LIBS cassini_storage)
cassini_check_suite(test_storage_index LABEL unit
                    SOURCES test_storage_index.c storage_index_fixture.c
                    LIBS cassini_storage_testenv cassini_storage)
cassini_check_suite(test_storage_index_components LABEL unit
                    SOURCES test_storage_index_components.c
                            storage_index_fixture.c
                    LIBS cassini_storage_testenv cassini_storage)
cassini_check_suite(test_storage_anticompaction LABEL unit
                    SOURCES test_storage_anticompaction.c
                    LIBS cassini_storage cassini_storage_testenv cassini_conf)
cassini_check_suite(test_storage_gc LABEL unit
                    SOURCES test_storage_gc.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_sampler LABEL unit
                    SOURCES test_storage_sampler.c
                    LIBS cassini_storage cassini_conf)
cassini_check_suite(test_storage_import LABEL unit
                    SOURCES test_storage_import.c
                    LIBS cassini_storage_fixture cassini_conf)
cassini_check_suite(test_storage_droppable LABEL unit
                    SOURCES test_storage_droppable.c
                    LIBS cassini_storage cassini_sim cassini_conf)
