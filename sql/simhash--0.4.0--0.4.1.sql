-- simhash 0.4.0 -> 0.4.1 (ALTER EXTENSION simhash UPDATE TO '0.4.1').
-- No SQL object changes: 0.4.1 is a new library. Its simhash indexes keep the entries of each page
-- in order of their segment value (page format 3), so that a lookup reads only the runs it asks
-- for, and have at least 256 buckets per segment. Indexes built by 0.4.0 (format 2) keep working
-- as they are, reading whole buckets; REINDEX one to get the new layout.

\echo Use "ALTER EXTENSION simhash UPDATE TO '0.4.1'" to load this file. \quit
