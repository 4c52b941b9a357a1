-- scripts/agreement.sh: the table's rows from the runs, after the (b)
-- predictions are in agreement_whatif: the latest run of each case; (a)'s
-- measured side the median of the latest emulated runs (agreement_a_measured).
INSERT OR REPLACE INTO agreement(part, case_name, ord, n, size, size_bytes, predicted_s,
                                 measured_s, pred_run, meas_run)
SELECT 'a', m.case_name, m.ord, m.n, printf('%.2f MB', m.k_bytes / 1e6), m.k_bytes,
       ps.step_s, m.step_s, p.run_id, m.run_id
FROM agreement_a_measured m
JOIN agreement_case p ON p.case_name = m.case_name AND p.n = m.n
     AND p.experiment = 'agreement-simulated'
JOIN agreement_step ps ON ps.run_id = p.run_id
WHERE p.run_id = (SELECT max(run_id) FROM agreement_case x
                  WHERE x.experiment = p.experiment AND x.case_name = p.case_name AND x.n = p.n);

INSERT OR REPLACE INTO agreement(part, case_name, ord, n, size, size_bytes, predicted_s,
                                 measured_s, pred_run, meas_run)
SELECT 'b', c.case_name, c.ord, c.n,
       CASE WHEN c.k_bytes < 1e6 THEN printf('%.1f KB', c.k_bytes / 1e3)
            ELSE printf('%.1f MB', c.k_bytes / 1e6) END, c.k_bytes,
       json_extract(w.json, '$.rows[0].step_s'), s.step_s, NULL, c.run_id
FROM agreement_case c JOIN agreement_step s ON s.run_id = c.run_id
JOIN agreement_whatif w ON w.run_id = c.run_id
WHERE c.part = 'b'
  AND c.run_id = (SELECT max(x.run_id) FROM agreement_case x JOIN agreement_whatif y
                    ON y.run_id = x.run_id
                  WHERE x.part = 'b' AND x.case_name = c.case_name AND x.n = c.n
                    AND x.k_bytes = c.k_bytes);
