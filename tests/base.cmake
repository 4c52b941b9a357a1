sg_add_test(test_opts SOURCES test_opts.c TIMEOUT 30)
