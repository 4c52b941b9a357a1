#!/bin/sh
# lab_check.sh SGDLAB SRC LAB: `sgdlab lab check LAB` on two student
# databases made by real runs in a private directory: one done as the
# lab's sheet asks, with right predictions (full marks, exit 0), and one
# with a planted mistake -- a missing run, a wrong setting or a wrong
# prediction (points lost, exit 1, and the line that says why).
# LAB badpred: a malformed predictions file is one line and exit 2.
# LAB blame: lab 8's blamed rank is read from the number recorded, not a text.
set -u
sg=${1:?usage: lab_check.sh SGDLAB SRC LAB}
src=${2:?}
lab=${3:?}
d=$(mktemp -d) || exit 1
trap 'rm -rf "$d"' EXIT
fail() { echo "FAIL: $*"; echo "$out"; exit 1; }
run() { "$sg" run "$@" -q >/dev/null 2>&1 || { out=""; fail "sgdlab run $*"; }; }
case $lab in
badpred)  # a predictions file that is not name: number: one line, exit 2
   printf 'ring_bytes_n8: lots\n' > "$d/p.yaml"
   out=$("$sg" lab check 1 --dir "$src/configs/labs" --db "$d/none.db" --predictions "$d/p.yaml" 2>&1)
   rc=$?
   echo "$out"
   [ $rc -eq 2 ] || fail "exit $rc, not 2"
   [ "$out" = "$d/p.yaml:1:16: ring_bytes_n8: expected a number" ] || fail "not the one line"
   exit 0 ;;
blame)  # lab 8's blame_rank reads the blamed rank recorded as data (run_info
   # blame.rank_number), not a text that names ranks; a database without
   # it (older sgdlab) is graded from blame.rank's text
   "$sg" run "$src/configs/labs/lab8-failure.yaml" --db "$d/b.db" -q >/dev/null 2>&1
   [ $? -eq 1 ] || { out=""; fail "sgdlab run lab8-failure: not exit 1"; }
   printf 'slow_run_fails: 0\nring_blamed_rank: 2\nworker_wait_s: 3.45\n' > "$d/p.yaml"
   q() { sqlite3 "$d/b.db" "$1" || fail "sqlite3: $1"; }
   grade() { out=$("$sg" lab check 8 --dir "$src/configs/labs" --db "$d/b.db" --predictions "$d/p.yaml" 2>&1); }
   nums=$(q "SELECT group_concat(i.value, ' ') FROM runs r JOIN run_info i ON i.run_id = r.id
     AND i.key = 'blame.rank_number' WHERE r.status = 'failed' ORDER BY r.id")
   out=$nums; [ "$nums" = "2 2" ] || fail "blame.rank_number of the two failed runs: '$nums', not '2 2'"
   # the texts name rank 3: the error and blame.rank (what the fallback reads)
   q "UPDATE runs SET error = 'rank 3 (worker, h, pid 1): rank 3 timed out' WHERE status = 'failed';
      UPDATE run_info SET value = 'rank 3 (worker, h, pid 1)' WHERE key = 'blame.rank'"
   grade; echo "$out"
   echo "$out" | grep -Eq '^score: ([0-9]+)/\1$' || fail "a text naming rank 3 changed the grade"
   # the number itself decides: blame.rank_number 1 loses the blame checks
   q "UPDATE run_info SET value = '1' WHERE key = 'blame.rank_number'"
   grade; echo "$out"
   echo "$out" | grep -q 'FAIL] 0/2  the failed ring blames rank 2: .* 1 != 2' ||
     fail "blame.rank_number 1 not read"
   # an older database: no blame.rank_number, blame.rank's text is read
   q "DELETE FROM run_info WHERE key = 'blame.rank_number';
      UPDATE run_info SET value = 'rank 2 (worker, h, pid 1)' WHERE key = 'blame.rank'"
   grade; echo "$out"
   echo "$out" | grep -Eq '^score: ([0-9]+)/\1$' || fail "without blame.rank_number: not graded from blame.rank"
   exit 0 ;;
1) cfg=$src/configs/labs/lab1-ring-vs-ps.yaml
   run "$cfg" --db "$d/ok.db"
   run "$cfg" --db "$d/bad.db" --set repeat=1          # one repeat, not two
   printf 'ring_bytes_n8: 109900\nps_bytes_n8: 502400\nring_messages_n8: 14\n' > "$d/ok.yaml"
   printf 'ring_bytes_n8: 54950\nps_bytes_n8: 502400\nring_messages_n8: 14\n' > "$d/bad.yaml"
   why='FAIL] 0/1  ps sync S=1 at N=2, 4, 8, two repeats each: 3 ok runs'
   why2='FAIL] 0/2  prediction ring_bytes_n8.*predicted 54950, measured 109904 (off by 50.0 %)'
   # a run name with a terminal escape (a student's database is anyone's text)
   sqlite3 "$d/bad.db" "UPDATE run_info SET value = 'ring' || char(27) || ']0;owned' || char(7)
     WHERE key = 'label' AND run_id = (SELECT min(id) FROM runs WHERE engine = 'allreduce')" ||
     fail "could not plant the escape"
   esc=1 ;;
2) cfg=$src/configs/labs/lab2-ssp-staleness.yaml
   run "$cfg" --db "$d/ok.db"
   run "$cfg" --db "$d/bad.db" --set engines.4.momentum=0.9  # async tuned apart
   printf 'server_bytes: 3256640\nssp0_max_staleness: 3\n' > "$d/ok.yaml"
   printf 'server_bytes: 1628320\nssp0_max_staleness: 3\n' > "$d/bad.yaml"
   why='FAIL] 0/2  one momentum for every mode.*momentum over 5 runs: 0.75,0.9'
   why2='FAIL] 0/2  prediction server_bytes.*off by 50' ;;
3) cfg=$src/configs/labs/lab3-sparse-vs-ring.yaml
   run "$cfg" --db "$d/ok.db"
   sed '/sparse: false/d' "$cfg" > "$d/lab3.yaml"            # the dense ps left out
   run "$d/lab3.yaml" --db "$d/bad.db"
   printf 'ring_bytes: 31457400\ndense_server_bytes: 83886400\nsparse_worker_bytes: 1024000\n' > "$d/ok.yaml"
   printf 'ring_bytes: 15728700\ndense_server_bytes: 83886400\nsparse_worker_bytes: 1024000\n' > "$d/bad.yaml"
   why='FAIL] 0/1  dense ps present: 0 ok runs'
   why2='FAIL] 0/2  prediction ring_bytes.*off by 50' ;;
4) b="bench allreduce --np 4 --sizes 4K:16M --name lab4-ring-vs-rhd -q"
   "$sg" $b --impl ring,rhd,native --db "$d/ok.db" >/dev/null 2>&1 || fail "bench"
   "$sg" $b --impl ring,rhd --db "$d/bad.db" >/dev/null 2>&1 || fail "bench"  # no native
   printf 'ring_messages: 6\nrhd_messages: 4\nbytes_factor: 1.5\n' > "$d/ok.yaml"
   printf 'ring_messages: 6\nrhd_messages: 6\nbytes_factor: 1.5\n' > "$d/bad.yaml"
   why='FAIL] 0/1  native (MPI_Allreduce) at 13 sizes, N = 4: 0 ok rows'
   why2='FAIL] 0/1  prediction rhd_messages.*predicted 6, answer 4' ;;
5) cfg=$src/configs/noniid-gossip.yaml
   run "$cfg" --db "$d/ok.db"
   sed '/engine: allreduce/d' "$cfg" > "$d/lab5.yaml"          # the exact average left out
   run "$d/lab5.yaml" --db "$d/bad.db" --set max_steps=20
   printf 'skew_classes: 1.5\n' > "$d/ok.yaml"
   printf 'skew_classes: 5\n' > "$d/bad.yaml"                 # ten classes halved
   why='FAIL] 0/1  the ring allreduce under the same skew.*: 0 ok runs'
   why2='FAIL] 0/1  prediction skew_classes.*predicted 5, answer 1.5' ;;
6) cfg=$src/configs/labs/lab6-consistent-init.yaml
   run "$cfg" --db "$d/ok.db"
   run "$cfg" --db "$d/bad.db" --set engines.2.init=consistent --set max_steps=20  # no fault
   printf 'bcast_bytes: 407080\nring_inits: 4\nps_inits: 1\n' > "$d/ok.yaml"
   printf 'bcast_bytes: 101770\nring_inits: 4\nps_inits: 1\n' > "$d/bad.yaml"  # floats, not bytes
   why='FAIL] 0/1  ring, init per-rank: 0 ok runs'
   why2='FAIL] 0/2  prediction bcast_bytes.*predicted 101770, answer 407080' ;;
7) cfg=$src/configs/labs/lab7-compression.yaml
   run "$cfg" --db "$d/ok.db"
   run "$cfg" --db "$d/bad.db" --set engines.1.compress=none --set max_steps=20  # no fp16
   printf 'fp16_bytes: 162240\ntopk1_bytes: 13008\ntopk1_ratio: 0.0401\n' > "$d/ok.yaml"
   printf 'fp16_bytes: 324480\ntopk1_bytes: 13008\ntopk1_ratio: 0.0401\n' > "$d/bad.yaml"
   why='FAIL] 0/1  ring fp16: 0 ok runs'
   why2='FAIL] 0/2  prediction fp16_bytes.*no ok run to compare with' ;;
8) cfg=$src/configs/labs/lab8-failure.yaml
   "$sg" run "$cfg" --db "$d/ok.db" -q >/dev/null 2>&1          # two runs fail: exit 1
   [ $? -eq 1 ] || { out=""; fail "sgdlab run $cfg: not exit 1"; }
   "$sg" run "$cfg" --db "$d/bad.db" --set delay_rank=1 -q >/dev/null 2>&1  # another rank slowed
   printf 'slow_run_fails: 0\nring_blamed_rank: 2\nworker_wait_s: 3.45\n' > "$d/ok.yaml"
   printf 'slow_run_fails: 0\nring_blamed_rank: 3\nworker_wait_s: 3.45\n' > "$d/bad.yaml"
   why='FAIL] 0/2  the failed ring blames rank 2: .* 1 != 2'
   why2='FAIL] 0/1  prediction ring_blamed_rank.*predicted 3, answer 2' ;;
9) cfg=$src/configs/labs/lab9-cnn-overlap.yaml
   run "$cfg" --db "$d/ok.db"
   sed '/overlap: true/d' "$cfg" > "$d/lab9.yaml"           # the buckets left out
   run "$d/lab9.yaml" --db "$d/bad.db"
   printf 'cnn_params: 44426\nbuckets_32k: 3\nring_bytes: 355408\n' > "$d/ok.yaml"
   printf 'cnn_params: 44426\nbuckets_32k: 4\nring_bytes: 355408\n' > "$d/bad.yaml"
   why='FAIL] 0/1  overlap with 32 KiB buckets: 0 ok runs'
   why2='FAIL] 0/1  prediction buckets_32k.*predicted 4, answer 3' ;;
10) cfg=$src/configs/labs/lab10-stragglers-ssp.yaml
   run "$cfg" --db "$d/ok.db"
   sed '/mode: ssp, staleness: 4, delay_rank: 2,/d' "$cfg" > "$d/lab10.yaml"  # no persistent-straggler ssp
   run "$d/lab10.yaml" --db "$d/bad.db"
   printf 'bsp_added_ms: 13.7\nssp_added_ms: 5\nssp4_staleness_bound: 27\n' > "$d/ok.yaml"
   printf 'bsp_added_ms: 5\nssp_added_ms: 5\nssp4_staleness_bound: 27\n' > "$d/bad.yaml"
   why='FAIL] 0/1  ssp(4), persistent straggler, present: 0 ok runs'
   why2='FAIL] 0/2  prediction bsp_added_ms.*predicted 5, answer 13.67' ;;
11) cfg=$src/configs/labs/lab11-embedding-sparse-ps.yaml
   run "$cfg" --db "$d/ok.db"
   sed '/sparse: true/d' "$cfg" > "$d/lab11.yaml"            # the sparse ps left out
   run "$d/lab11.yaml" --db "$d/bad.db"
   printf 'ring_bytes: 12636384\ndense_server_bytes: 33697024\nsparse_worker_bound: 202368\nring_ms_100mbit: 510\n' > "$d/ok.yaml"
   printf 'ring_bytes: 6318192\ndense_server_bytes: 33697024\nsparse_worker_bound: 202368\nring_ms_100mbit: 510\n' > "$d/bad.yaml"
   why='FAIL] 0/1  sparse ps present: 0 ok runs'
   why2='FAIL] 0/2  prediction ring_bytes.*off by 50' ;;
*) echo "no test for lab $lab"; exit 2 ;;
esac
out=$("$sg" lab check "$lab" --dir "$src/configs/labs" --db "$d/ok.db" --predictions "$d/ok.yaml" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || fail "the correct database: exit $rc"
full=$(echo "$out" | sed -n 's/^score: \([0-9]*\)\/\([0-9]*\)$/\1 \2/p')
set -- $full
[ $# -eq 2 ] && [ "$1" = "$2" ] || fail "the correct database: not full marks ($full)"
out=$("$sg" lab check "$lab" --dir "$src/configs/labs" --db "$d/bad.db" --predictions "$d/bad.yaml" 2>&1)
rc=$?
echo "$out"
[ $rc -eq 1 ] || fail "the wrong database: exit $rc, not 1"
echo "$out" | grep -q "$why" || fail "the wrong database: no line '$why'"
echo "$out" | grep -q "$why2" || fail "the wrong database: no line '$why2'"
if [ "${esc:-0}" = 1 ]; then
  echo "$out" | grep -q 'ring?\]0;owned? N=2' || fail "the planted name is not shown made printable"
  ! printf '%s' "$out" | LC_ALL=C grep -q "$(printf '\033')" || fail "an escape byte reached the output"
fi
score=$(echo "$out" | sed -n 's/^score: \([0-9]*\)\/\([0-9]*\)$/\1 \2/p')
set -- $score
[ $# -eq 2 ] && [ "$1" -lt "$2" ] || fail "the wrong database lost no points ($score)"
exit 0
