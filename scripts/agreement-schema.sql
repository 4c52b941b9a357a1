-- scripts/agreement.sh: the views its tables are computed from.  Every
-- object is agreement_*; the runs' own tables are only read.
CREATE TABLE IF NOT EXISTS agreement_whatif(run_id INTEGER PRIMARY KEY, json TEXT NOT NULL);
-- Settings of the last agreement.sh: reps, the emulated runs per case
-- whose median is (a)'s measured side.
CREATE TABLE IF NOT EXISTS agreement_opts(key TEXT PRIMARY KEY, value);
-- One row per case, N and size: predicted and measured seconds per step.
-- Filled from the runs by agreement-fill.sql; a row no run fills stays.
CREATE TABLE IF NOT EXISTS agreement(part TEXT NOT NULL, case_name TEXT NOT NULL, ord INTEGER,
  n INTEGER NOT NULL, size TEXT NOT NULL, size_bytes REAL, predicted_s REAL, measured_s REAL,
  pred_run INTEGER, meas_run INTEGER, UNIQUE(part, case_name, n, size));

DROP VIEW IF EXISTS agreement_period;
DROP VIEW IF EXISTS agreement_step;
DROP VIEW IF EXISTS agreement_case;
DROP VIEW IF EXISTS agreement_b_runs;
DROP VIEW IF EXISTS agreement_compute;
DROP VIEW IF EXISTS agreement_err;
DROP VIEW IF EXISTS agreement_summary;
DROP VIEW IF EXISTS agreement_a_measured;

-- The runs of the agreement experiments: part, side and case.  Warm-up:
-- 5 of (a)'s 15 steps (the emulated ranks' first steps include their
-- connections), 1 of (b)'s 4 (simulated time has no noise).
CREATE VIEW agreement_case AS
SELECT r.id AS run_id, e.name AS experiment, r.workers AS n,
  CASE WHEN e.name IN ('agreement-emulated', 'agreement-simulated') THEN 'a' ELSE 'b' END AS part,
  CASE WHEN e.name = 'agreement-emulated' THEN 5 WHEN e.name = 'agreement-simulated' THEN 5
       ELSE 1 END AS warmup,
  CASE r.engine
    WHEN 'allreduce' THEN json_extract(r.options_json, '$.algorithm')
      || CASE WHEN json_extract(r.options_json, '$.algorithm') = 'hier'
              THEN ' G=' || min(json_extract(r.options_json, '$.group'), r.workers) ELSE '' END
    WHEN 'ps' THEN 'ps S=' || r.servers
    WHEN 'mapreduce' THEN 'mapreduce ' || json_extract(r.options_json, '$.aggregate')
    ELSE r.engine END AS case_name,
  CASE r.engine
    WHEN 'allreduce' THEN json_extract(r.options_json, '$.algorithm')
    WHEN 'ps' THEN 'ps'
    WHEN 'mapreduce' THEN CASE json_extract(r.options_json, '$.aggregate')
                          WHEN 'tree' THEN 'mapreduce-tree' ELSE 'mapreduce' END
    ELSE r.engine END AS wcase,
  CASE r.engine
    WHEN 'allreduce' THEN CASE json_extract(r.options_json, '$.algorithm')
                          WHEN 'ring' THEN 1 WHEN 'rhd' THEN 2 WHEN 'tree' THEN 3 ELSE 4 END
    WHEN 'ps' THEN 4 + r.servers
    ELSE CASE json_extract(r.options_json, '$.aggregate') WHEN 'tree' THEN 8 ELSE 7 END END AS ord,
  -- K: 4 bytes per parameter, from run_info's workload line "... (N params) ..."
  4.0 * CAST(substr(w.value, instr(w.value, '(') + 1,
                    instr(w.value, ' params') - instr(w.value, '(') - 1) AS INTEGER) AS k_bytes
FROM runs r JOIN experiments e ON e.id = r.experiment_id
JOIN run_info w ON w.run_id = r.id AND w.key = 'workload'
WHERE r.status = 'ok' AND (e.name IN ('agreement-emulated', 'agreement-simulated')
                           OR e.name LIKE 'agreement-model-%');

-- Step periods: successive t_start of one worker (executor) after the
-- warm-up, as sgdlab model's "measured".
CREATE VIEW agreement_period AS
SELECT s.run_id, s.t_start - lag(s.t_start) OVER (PARTITION BY s.run_id, s.rank ORDER BY s.step) AS d
FROM steps s JOIN agreement_case c ON c.run_id = s.run_id
WHERE s.step >= c.warmup AND coalesce(s.role, 'worker') IN ('worker', 'executor');

-- The median period of each run.
CREATE VIEW agreement_step AS
SELECT run_id, avg(d) AS step_s FROM (
  SELECT run_id, d, row_number() OVER (PARTITION BY run_id ORDER BY d) AS i,
         count(*) OVER (PARTITION BY run_id) AS cnt
  FROM agreement_period WHERE d IS NOT NULL)
WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY run_id;

-- The median compute_s of each run's workers (executors; hub 0) and of
-- its ps servers or mapreduce driver (hub 1) after the warm-up: modeled,
-- the step time charged (the hub: nothing); executed, what was charged.
CREATE VIEW agreement_compute AS
SELECT run_id, hub, avg(x) AS compute_s FROM (
  SELECT s.run_id, s.role IN ('server', 'driver') AS hub, s.compute_s AS x,
         row_number() OVER (PARTITION BY s.run_id, s.role IN ('server', 'driver')
                            ORDER BY s.compute_s) AS i,
         count(*) OVER (PARTITION BY s.run_id, s.role IN ('server', 'driver')) AS cnt
  FROM steps s JOIN agreement_case c ON c.run_id = s.run_id
  WHERE s.step >= c.warmup AND coalesce(s.role, 'worker') IN ('worker', 'executor', 'server', 'driver'))
WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY run_id, hub;

-- (b): what sgdlab model --what-if needs of each simulated run: alpha is
-- two links' latency (a message crosses its sender's and its receiver's
-- link on the flat platform); compute, as in sgdlab model, the run's own
-- median compute of a worker (compute_s) and that of the hub (hub_s: a
-- sync server applies the update, the driver its sum, on every step's
-- path), so gamma is 0 (the hub's compute holds the reduction; modeled
-- compute charges none);
-- slice the ps slice as the engine applies it (dense sync shards of at
-- least slice_from; sizes K, M, G are powers of two).
CREATE VIEW agreement_b_runs AS
SELECT c.run_id, printf('%d', c.k_bytes) AS k_bytes, c.n,
  max(r.servers, 1) AS servers, c.wcase,
  json_extract(r.options_json, '$."simulate.link"') AS link,
  printf('%.9g', 2 * CAST(lat.value AS REAL)) AS alpha_s,
  printf('%.9g', cm.compute_s) AS compute_s, printf('%.9g', coalesce(hb.compute_s, 0)) AS hub_s,
  '0' AS gamma,
  CASE WHEN r.engine = 'ps' AND json_extract(r.options_json, '$.mode') = 'sync'
        AND NOT coalesce(json_extract(r.options_json, '$.sparse'), 0)
        AND c.k_bytes / max(r.servers, 1) >= (SELECT v FROM (
              SELECT CAST(x AS REAL) * CASE upper(substr(x, -1)) WHEN 'K' THEN 1024
                WHEN 'M' THEN 1048576 WHEN 'G' THEN 1073741824 ELSE 1 END AS v
              FROM (SELECT json_extract(r.options_json, '$.slice_from') AS x)))
       THEN (SELECT printf('%d', CAST(x AS REAL) * CASE upper(substr(x, -1)) WHEN 'K' THEN 1024
                WHEN 'M' THEN 1048576 WHEN 'G' THEN 1073741824 ELSE 1 END)
             FROM (SELECT json_extract(r.options_json, '$.slice') AS x))
       ELSE '0' END AS slice
FROM agreement_case c JOIN runs r ON r.id = c.run_id
JOIN run_info lat ON lat.run_id = c.run_id AND lat.key = 'simulate.latency_s'
JOIN agreement_compute cm ON cm.run_id = c.run_id AND cm.hub = 0
LEFT JOIN agreement_compute hb ON hb.run_id = c.run_id AND hb.hub = 1
WHERE c.part = 'b';

-- (a)'s measured side: per case and N, the median time per step of its
-- latest `reps` emulated runs (agreement_opts; 3 unless set), and how
-- many there were.  agreement.sh runs the emulated experiment `reps`
-- times over, so a case's runs are interleaved with the other cases'.
CREATE VIEW agreement_a_measured AS
SELECT case_name, min(ord) AS ord, n, max(k_bytes) AS k_bytes, avg(step_s) AS step_s,
       max(latest) AS run_id, max(cnt) AS runs, max(hi) AS hi_s, min(lo) AS lo_s FROM (
  SELECT *, row_number() OVER (PARTITION BY case_name, n ORDER BY step_s) AS i,
         count(*) OVER (PARTITION BY case_name, n) AS cnt,
         max(run_id) OVER (PARTITION BY case_name, n) AS latest,
         max(step_s) OVER (PARTITION BY case_name, n) AS hi,
         min(step_s) OVER (PARTITION BY case_name, n) AS lo FROM (
    SELECT m.case_name, m.ord, m.n, m.k_bytes, m.run_id, ms.step_s,
           row_number() OVER (PARTITION BY m.case_name, m.n ORDER BY m.run_id DESC) AS recent
    FROM agreement_case m JOIN agreement_step ms ON ms.run_id = m.run_id
    WHERE m.experiment = 'agreement-emulated')
  WHERE recent <= coalesce((SELECT value FROM agreement_opts WHERE key = 'reps'), 3))
WHERE i IN ((cnt + 1) / 2, (cnt + 2) / 2) GROUP BY case_name, n;

-- Per row: the relative error |p - m| / m.
CREATE VIEW agreement_err AS
SELECT *, abs(predicted_s - measured_s) / measured_s AS err FROM agreement
WHERE predicted_s IS NOT NULL AND measured_s > 0;

-- Per part: the geometric mean of the errors (an error under 0.01 % counts
-- as 0.01 %, so that one exact case does not make it 0) and the worst.
CREATE VIEW agreement_summary AS
SELECT e.part, exp(avg(ln(max(e.err, 1e-4)))) AS gmean, count(*) AS cases,
  w.case_name AS worst_case, w.n AS worst_n, w.size AS worst_size, w.err AS worst
FROM agreement_err e JOIN (
  SELECT part, case_name, n, size, err,
         row_number() OVER (PARTITION BY part ORDER BY err DESC) AS i FROM agreement_err) w
  ON w.part = e.part AND w.i = 1
GROUP BY e.part;
