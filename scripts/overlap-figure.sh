#!/usr/bin/env bash
# Draw overlap's gain vs link rate from the runs of configs/overlap-links.yaml
# or overlap-links-2.yaml (docs/engines/allreduce.md, "Overlap's gain vs
# link rate"):
#   for i in 1 2 3; do sgdlab run configs/overlap-links.yaml --db ov.db -q; done
#   scripts/overlap-figure.sh ov.db [OUT_PREFIX [EXPERIMENT]]
#   (defaults docs/img/overlap-links and overlap-links; EXPERIMENT is
#   letters, digits and '-' only, and N in the axis label is read from
#   the runs)
# Per run: the median worker step (compute + comm + wait, steps 5 on);
# per variant and link rate: the median over the passes, printed as a
# table with the gain over overlap off, and drawn into OUT_PREFIX.png/.svg.
# Then, from the buckets table, how much of the buckets' allreduce time
# ran while backward still ran (before the step's compute_s ended).
# Every query runs under timeout (OVERLAP_FIGURE_QUERY_S, default 120 s;
# a hostile database can hold a view that never ends) and the table it
# prints has its control characters removed (terminal escapes in a
# link name).  Only numbers reach gnuplot: the variants' names are this script's own,
# and the two paths it names (OUT_PREFIX, the temporary directory) are
# gnuplot single-quoted strings with their quotes doubled (a quote in
# OUT_PREFIX would otherwise end the string and run what follows, e.g.
# system('...')); a path with a control character is refused.
set -euo pipefail
db=${1:?usage: overlap-figure.sh DB [OUT_PREFIX]}
out=${2:-docs/img/overlap-links}
exp=${3:-overlap-links}
case $exp in ''|*[!a-z0-9-]*) echo "overlap-figure.sh: experiment '$exp': letters, digits and '-' only" >&2; exit 2 ;; esac
gq() { # $1 as a gnuplot single-quoted string
  case $1 in *[[:cntrl:]]*) echo "overlap-figure.sh: a control character in a path" >&2; exit 2 ;; esac
  local q="'"
  printf "'%s'" "${1//$q/$q$q}"
}
gq "$out" >/dev/null
case $db in *[?#%]*) echo "overlap-figure.sh: '$db': ? # and % would be read as URI syntax" >&2; exit 2 ;; esac
# every query bounded (a hostile database can hold a view that never
# ends) and its text printed without control characters (a link name
# could carry terminal escapes)
qs=${OVERLAP_FIGURE_QUERY_S:-120}
case $qs in ''|*[!0-9]*) echo "overlap-figure.sh: OVERLAP_FIGURE_QUERY_S '$qs': seconds" >&2; exit 2 ;; esac
sq() {
  local rc=0
  timeout "$qs" sqlite3 "$@" || rc=$?
  [ $rc = 0 ] && return 0
  echo "overlap-figure.sh: a query of the database failed or ran past ${qs} s (exit $rc)" >&2
  return 1
}
clean() { LC_ALL=C tr -d '\000-\010\013-\037\177'; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
gq "$tmp" >/dev/null

# variant (0 off, 1 one bucket, 2 16K buckets), link in Mbit/s, run, step ms
sq -separator ' ' "file:$db?mode=ro" "
  WITH r AS (SELECT id,
      CASE WHEN json_extract(options_json, '$.overlap') = 0 THEN 0
           WHEN json_extract(options_json, '$.bucket') >= 1048576 THEN 1 ELSE 2 END AS v,
      json_extract(options_json, '$.\"cluster.link\"') AS link
    FROM runs WHERE status = 'ok' AND experiment_id IN
      (SELECT id FROM experiments WHERE name = '$exp'))
  SELECT r.v,
    CASE WHEN r.link GLOB '*gbit' THEN 1000 * CAST(rtrim(r.link, 'gbit') AS REAL)
         WHEN r.link GLOB '*mbit' THEN CAST(rtrim(r.link, 'mbit') AS REAL) ELSE -1 END,
    r.id, 1e3 * (s.compute_s + s.comm_s + s.wait_s)
  FROM r JOIN steps s ON s.run_id = r.id
  WHERE s.kind = 'worker' AND s.step >= 5
  ORDER BY r.v, 2, r.id, 4" > "$tmp/steps"

# the median of each run, then the median over the runs of a point
awk '
  function med(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { k = $1 " " $2 " " $3; if (k != last && n) { print last, med(x, n); n = 0 } last = k; x[++n] = $4 }
  END { if (n) print last, med(x, n) }' "$tmp/steps" |
  sort -k1,1n -k2,2n -k4,4n |
  awk '
  function med(a, n) { return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
  { k = $1 " " $2; if (k != last && n) { print last, med(x, n), n, lo, hi; n = 0 }
    if (!n) lo = $4; hi = $4; last = k; x[++n] = $4 }
  END { if (n) print last, med(x, n), n, lo, hi }' > "$tmp/points"

echo "# variant (0 off, 1 one bucket, 2 16K buckets)  link Mbit/s  median step ms  runs  min  max"
cat "$tmp/points"
echo "# gain = step ms off / step ms with overlap, per link rate"
awk '$1 == 0 { off[$2] = $3 } $1 > 0 && ($2 in off) { printf "variant %d  %g Mbit/s  %.3f\n", $1, $2, off[$2] / $3 }' \
  "$tmp/points"

nw=$(sq "file:$db?mode=ro" "SELECT COALESCE(MAX(workers), 0) FROM runs WHERE experiment_id IN
  (SELECT id FROM experiments WHERE name = '$exp')" 2>/dev/null) || nw=0
case $nw in ''|*[!0-9]*|0) ring='ring' ;; *) ring="ring N = $nw" ;; esac
for v in 0 1 2; do awk -v v=$v '$1 == v { print $2, $3, $5, $6 }' "$tmp/points" > "$tmp/v$v.tsv"; done
cat > "$tmp/fig.gp" <<EOF
set logscale x
set xlabel 'link rate (Mbit/s), $ring, one rank per emulated host'
set ylabel 'step time (ms): median of the passes, bars min..max'
set xrange [14:1500]
set yrange [0:*]
set title 'CNN (174 KiB of gradient): overlap off and on, by link rate'
set key top right
set grid
plot $(gq "$tmp/v0.tsv") using 1:2:3:4 with yerrorlines lw 2 title 'overlap off', \
     $(gq "$tmp/v1.tsv") using 1:2:3:4 with yerrorlines lw 2 title 'overlap, one bucket (1M)', \
     $(gq "$tmp/v2.tsv") using 1:2:3:4 with yerrorlines lw 2 title 'overlap, 16 KiB buckets (3 a step)'
EOF
gnuplot -e "set terminal pngcairo size 900,560; set output $(gq "$out.png")" "$tmp/fig.gp"
gnuplot -e "set terminal svg size 900,560; set output $(gq "$out.svg")" "$tmp/fig.gp"
echo "# drawn: $out.png, $out.svg"

echo "# buckets: share of allreduce time before backward ended, per variant and link (all sampled steps)"
sq -separator ' ' "file:$db?mode=ro" "
  WITH r AS (SELECT id,
      CASE WHEN json_extract(options_json, '$.overlap') = 0 THEN 0
           WHEN json_extract(options_json, '$.bucket') >= 1048576 THEN 1 ELSE 2 END AS v,
      json_extract(options_json, '$.\"cluster.link\"') AS link
    FROM runs WHERE status = 'ok' AND experiment_id IN
      (SELECT id FROM experiments WHERE name = '$exp'))
  SELECT r.v, r.link, count(*),
    round(sum(max(0, min(b.end_s, s.compute_s) - b.start_s)) / sum(b.end_s - b.start_s), 3),
    round(1e3 * avg(b.start_s - b.ready_s), 2), round(1e3 * avg(s.compute_s), 2),
    round(1e3 * avg(b.end_s - b.start_s), 2)
  FROM r JOIN buckets b ON b.run_id = r.id
  JOIN steps s ON s.run_id = b.run_id AND s.rank = b.rank AND s.step = b.step
  WHERE b.step > 0 GROUP BY r.v, r.link ORDER BY r.v, r.link" | clean |
  awk 'BEGIN { print "# variant link rows share_concurrent mean_ms(ready->start) mean_ms(compute) mean_ms(bucket allreduce)" } { print }'
