-- simhash() reads text as UTF-8 whatever the database encoding: a text converted from another
-- server encoding has the same fingerprint; bytes that are not UTF-8 in SQL_ASCII are an error.
SELECT current_database() AS regress_db \gset
SELECT simhash('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。') AS utf8_fp \gset

SET client_min_messages = warning;
DROP DATABASE IF EXISTS simhash_regress_euc_cn;
DROP DATABASE IF EXISTS simhash_regress_sql_ascii;
RESET client_min_messages;
CREATE DATABASE simhash_regress_euc_cn ENCODING 'EUC_CN' LOCALE 'C' TEMPLATE template0;
CREATE DATABASE simhash_regress_sql_ascii ENCODING 'SQL_ASCII' LOCALE 'C' TEMPLATE template0;

\c simhash_regress_euc_cn
SET client_encoding = 'UTF8';
CREATE EXTENSION simhash;
SELECT getdatabaseencoding(),
       simhash('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。') = :'utf8_fp' AS same_fingerprint;

\c simhash_regress_sql_ascii
CREATE EXTENSION simhash;
SELECT getdatabaseencoding(), simhash('plain ASCII text works') IS NOT NULL AS ascii_ok;
\set VERBOSITY default
SELECT simhash(E'not UTF-8: \xff\xfe here');
\set VERBOSITY sqlstate
SELECT simhash(E'not UTF-8: \xff\xfe here');
\set VERBOSITY default

\c :regress_db
DROP DATABASE simhash_regress_euc_cn;
DROP DATABASE simhash_regress_sql_ascii;
