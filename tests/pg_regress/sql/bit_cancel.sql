-- A cancel (here a statement timeout) stops the build of an index of codes, also while a second
-- thread makes the segments' entries: the build ends with 57014 and leaves no index, and the
-- backend has one thread again; the next build in the same backend starts a thread again and
-- writes a sound index. No time is measured and the output does not depend on the machine's
-- speed: each build (200,000 codes of 1,024 bits, every segment indexed: about 0.5 s on a 2-core
-- machine, the first 0.1-0.3 s reading and ordering the rows) runs under a timeout of 50 to
-- 800 ms inside a block that catches the cancel (query_canceled), and what is left is checked
-- after it: no index or a sound one, one thread. The timeouts from 200 ms on land while the
-- second thread works here (seen with a trace at the backend's checks); on a faster machine the
-- shorter ones do, on a slower one the longer ones. At least one build must be cancelled.
\set VERBOSITY sqlstate
SET jit = off;
CREATE FUNCTION pg_temp.threads() RETURNS int LANGUAGE sql AS
$$ SELECT substring(pg_read_file('/proc/' || pg_backend_pid() || '/status') FROM 'Threads:\s*(\d+)')::int $$;
CREATE TABLE ccancel AS
SELECT i, ('x' || repeat(md5(i::text), 8))::bit(1024) AS code FROM generate_series(1, 200000) i;
CREATE TABLE outcomes (workers int, timeout_ms int, threads int, outcome text);
-- What a build under a timeout left: the index gone (cancelled) or sound (built), one thread.
CREATE FUNCTION pg_temp.outcome(workers int, timeout_ms int) RETURNS void LANGUAGE plpgsql AS $$
DECLARE index regclass := to_regclass('ccancel_code');
BEGIN
    INSERT INTO outcomes SELECT workers, timeout_ms, pg_temp.threads(),
        CASE WHEN index IS NULL THEN 'cancelled'
             WHEN simhash_index_check(index) = 200000 THEN 'built' ELSE 'unsound' END;
    IF index IS NOT NULL THEN DROP INDEX ccancel_code; END IF;
END $$;
SET maintenance_work_mem = '256MB';
SET max_parallel_workers = 8;
-- Each build a statement of its own (a timeout is a statement's), run by \gexec in turn: the
-- workers allowed (2: a second thread; 0: one thread), the timeout, the build in a block that
-- catches the cancel, then what it left.
SELECT pg_catalog.format('SET max_parallel_maintenance_workers = %s', workers),
       pg_catalog.format('SET statement_timeout = %L', pg_catalog.format('%sms', timeout_ms)),
       'DO $$ BEGIN CREATE INDEX ccancel_code ON ccancel USING simhash (code) WITH (segments = 256);
        EXCEPTION WHEN query_canceled THEN NULL; END $$',
       'RESET statement_timeout',
       pg_catalog.format('DO $$ BEGIN PERFORM pg_temp.outcome(%s, %s); END $$', workers, timeout_ms)
FROM (VALUES (2, 50), (2, 100), (2, 200), (2, 300), (2, 500), (2, 800), (0, 50), (0, 200)) AS r(workers, timeout_ms)
\gexec
SELECT count(*) AS builds, bool_and(threads = 1) AS one_thread_after_each, bool_and(outcome <> 'unsound') AS none_unsound,
       count(*) FILTER (WHERE outcome = 'cancelled' AND workers = 2) > 0 AS a_threaded_build_cancelled,
       count(*) FILTER (WHERE outcome = 'cancelled' AND workers = 0) > 0 AS a_build_on_one_thread_cancelled
FROM outcomes;
-- A build of 20,000 of the rows in the same backend, on a second thread again.
SET max_parallel_maintenance_workers = 2;
DELETE FROM ccancel WHERE i > 20000;
\set VERBOSITY default
SET client_min_messages = debug1;
CREATE INDEX ccancel_code ON ccancel USING simhash (code) WITH (segments = 256);
RESET client_min_messages;
\set VERBOSITY sqlstate
SELECT simhash_index_check('ccancel_code') AS indexed, pg_temp.threads() AS threads_after_the_build;
DROP TABLE ccancel, outcomes;
