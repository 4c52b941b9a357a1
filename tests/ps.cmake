# ps engine tests (every test has a TIMEOUT).
sg_add_test(test_ps_proto SOURCES test_ps_proto.c TIMEOUT 30 INTERNALS ps)
sg_add_test(test_ps_compress SOURCES test_ps_compress.c TIMEOUT 30 LABELS ps)
sg_add_test(test_ps_train SOURCES test_ps_train.c TIMEOUT 300 LABELS ps INTERNALS ps)
sg_add_test(test_ps_run SOURCES test_ps_run.c TIMEOUT 300 LABELS ps LIBS PkgConfig::SQLITE)
sg_add_test(test_ps_sparse SOURCES test_ps_sparse.c TIMEOUT 60 LABELS ps)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_ps_run sgdlab sgdlab-rank)
sg_add_test(test_embed_run SOURCES test_embed_run.c TIMEOUT 300 LABELS ps)
