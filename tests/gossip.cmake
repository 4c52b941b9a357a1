# gossip engine: the pairing schedule (a matching every round, each
# topology's promise), then real processes: one worker = local, four
# workers converge on both transports (and a planted bug that skips the
# averaging does not), a dead peer fails the run naming it.
# test_gossip_run takes ~60 s here.
sg_add_test(test_gossip SOURCES test_gossip.c TIMEOUT 30 LABELS gossip INTERNALS gossip)
sg_add_test(test_gossip_run SOURCES test_gossip_run.c TIMEOUT 240 LABELS gossip)
# runs the real sgdlab and sgdlab-rank
add_dependencies(test_gossip_run sgdlab sgdlab-rank)
