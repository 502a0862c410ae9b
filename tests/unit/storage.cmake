# Storage unit suites. Each stays well under a minute under ASan.
cassini_check_suite(test_storage_model LABEL unit
                    SOURCES test_storage_model.c LIBS cassini_storage)
cassini_check_suite(test_storage_memtable LABEL unit
                    SOURCES test_storage_memtable.c LIBS cassini_storage)
