sg_add_test(test_opts SOURCES test_opts.c TIMEOUT 30)
sg_add_test(test_one_worker SOURCES test_one_worker.c TIMEOUT 240)
