/* test_delay.c - which steps the on-purpose straggler is slowed on
 * (sg_delay_hit, core/engine.h; settings delay_rank, delay_prob).
 *
 *  - who: delay_rank -1 slows no one, R only rank R, -2 every rank;
 *    delay_prob 1 every step, 0 none;
 *  - draws: delay_prob 0.25 slows 2,500 +- 200 of 10,000 steps of a rank
 *    (the draw is a hash of seed, rank and step: the count is a fixed
 *    number, the band only says the hash is not skewed); with -2 ranks
 *    draw apart (two ranks both slowed on about 1/16 of the steps, not
 *    1/4), and another seed slows other steps;
 *  - the same arguments give the same answer (no state): the slowed
 *    steps of a run follow from its settings.
 */
#include "test.h"

#include "engine.h"

TEST(who_is_slowed) {
  for (int64_t step = 0; step < 100; step++)
    for (int rank = 0; rank < 4; rank++) {
      CHECK_EQ_INT(sg_delay_hit(-1, 1.0, 1, rank, step), 0);
      CHECK_EQ_INT(sg_delay_hit(2, 1.0, 1, rank, step), rank == 2);
      CHECK_EQ_INT(sg_delay_hit(-2, 1.0, 1, rank, step), 1);
      CHECK_EQ_INT(sg_delay_hit(-2, 0.0, 1, rank, step), 0);
      CHECK_EQ_INT(sg_delay_hit(2, 0.25, 1, rank, step) && rank != 2, 0);
    }
}

TEST(draws) {
  int hits = 0, both = 0, same_other_seed = 0;
  for (int64_t step = 0; step < 10000; step++) {
    int a = sg_delay_hit(-2, 0.25, 7, 1, step), b = sg_delay_hit(-2, 0.25, 7, 2, step);
    CHECK_EQ_INT(a, sg_delay_hit(-2, 0.25, 7, 1, step));
    CHECK_EQ_INT(a, sg_delay_hit(1, 0.25, 7, 1, step)); /* one rank or all: the same draw */
    hits += a;
    both += a && b;
    same_other_seed += a == sg_delay_hit(-2, 0.25, 8, 1, step);
  }
  CHECK_MSG(hits >= 2300 && hits <= 2700, "%d of 10000 steps slowed at p = 0.25", hits);
  CHECK_MSG(both >= 500 && both <= 760, "ranks 1 and 2 both slowed on %d of 10000", both);
  /* independent draws agree on 0.75^2 + 0.25^2 = 62.5 % of the steps */
  CHECK_MSG(same_other_seed < 7000, "seeds 7 and 8 agree on %d of 10000 steps", same_other_seed);
}
