-- The results tables a hand-made hostile database starts from (hostile_db.sh,
-- hostile_checks.sh); each script adds steps, evals and the rest its own way.
CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT NOT NULL, config_text TEXT,
  started_at TEXT, host TEXT, version TEXT);
CREATE TABLE runs(id INTEGER PRIMARY KEY, experiment_id INTEGER, engine TEXT NOT NULL,
  options_json TEXT, transport TEXT, launcher TEXT, workers INTEGER, servers INTEGER,
  processes INTEGER, repeat INTEGER, seed INTEGER, status TEXT NOT NULL, error TEXT,
  started_at TEXT, finished_at TEXT, wall_s REAL, harness_pid INTEGER, harness_host TEXT,
  harness_start TEXT, tmp_dir TEXT);
CREATE TABLE run_info(run_id INTEGER NOT NULL, key TEXT, value TEXT);
CREATE TABLE ranks(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, host TEXT, pid INTEGER,
  cluster_host TEXT, address TEXT, kind TEXT);
