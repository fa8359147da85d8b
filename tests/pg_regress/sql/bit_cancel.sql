-- A cancel (here a statement timeout) stops the build of an index of codes, also while a second
-- thread makes the segments' entries: the build ends with 57014, the thread is gone (the backend
-- has one thread again), no index is left, and the next build in the same backend starts a thread
-- again and writes a sound index. No time is measured: 200,000 codes of 1,024 bits with every
-- segment indexed (57 of them) take about 0.5 s to index on a 2-core machine, of which the first
-- 0.07 s read the rows and order them, so the 200 ms timeout lands while the thread works (seen
-- with a trace at the backend's checks: at segment 32 of 57 for a timeout at 300 ms), on machines
-- 2x faster or 3x slower too; elsewhere it lands earlier or later in the build, with the same
-- outcome.
\set VERBOSITY sqlstate
SET jit = off;
CREATE FUNCTION pg_temp.threads() RETURNS int LANGUAGE sql AS
$$ SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status') FROM 'Threads:\s*(\d+)')::int $$;
CREATE TABLE ccancel AS
SELECT i, ('x' || repeat(md5(i::text), 8))::bit(1024) AS code FROM generate_series(1, 200000) i;
SET maintenance_work_mem = '256MB';
SET max_parallel_maintenance_workers = 2;
SET max_parallel_workers = 8;
SET statement_timeout = '200ms';
CREATE INDEX ccancel_code ON ccancel USING simhash (code) WITH (segments = 256);
RESET statement_timeout;
SELECT pg_temp.threads() AS threads_after_the_cancel,
       to_regclass('ccancel_code') IS NULL AS no_index_left;
-- The same on one thread.
SET max_parallel_maintenance_workers = 0;
SET statement_timeout = '200ms';
CREATE INDEX ccancel_code ON ccancel USING simhash (code) WITH (segments = 256);
RESET statement_timeout;
SELECT pg_temp.threads() AS threads_after_the_cancel,
       to_regclass('ccancel_code') IS NULL AS no_index_left;
-- A build of 20,000 of the rows in the same backend, on a second thread again.
SET max_parallel_maintenance_workers = 2;
DELETE FROM ccancel WHERE i > 20000;
\set VERBOSITY default
SET client_min_messages = debug1;
CREATE INDEX ccancel_code ON ccancel USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
\set VERBOSITY sqlstate
SELECT simhash_index_check('ccancel_code') AS indexed, pg_temp.threads() AS threads_after_the_build;
DROP TABLE ccancel;
