-- simhash() reads text as UTF-8 whatever the database encoding: a text converted from another
-- server encoding has the same fingerprint; bytes that are not UTF-8 in SQL_ASCII are an error.
SELECT current_database() AS regress_db \gset
SELECT simhash('海量网页去重是搜索引擎的基础工作，相似的文章应该只保留一份，以节省存储和带宽。') AS utf8_fp \gset
SELECT simhash(ARRAY['海量', '网页', '去重'], ARRAY[3.0, 2.0, 1.0]) AS utf8_features_fp,
       (SELECT simhash_agg(f, w) FROM (VALUES ('海量', 3.0), ('网页', 2.0), ('去重', 1.0)) v(f, w)) AS utf8_agg_fp \gset
SELECT simhash_similarity('海量网页去重是搜索引擎的基础工作', '海量網頁去重是搜尋引擎的基礎') AS utf8_similarity \gset

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
-- Custom features too: the array form and the aggregate read each feature as UTF-8.
SELECT simhash(ARRAY['海量', '网页', '去重'], ARRAY[3.0, 2.0, 1.0]) = :'utf8_features_fp' AS same_array_fingerprint,
       (SELECT simhash_agg(f, w) FROM (VALUES ('海量', 3.0), ('网页', 2.0), ('去重', 1.0)) v(f, w)) = :'utf8_agg_fp' AS same_agg_fingerprint;
-- The similarity reads both texts as the fingerprints do (Traditional characters outside EUC-CN
-- are not in this database: the Simplified spelling of the second text).
SELECT simhash_similarity('海量网页去重是搜索引擎的基础工作', '海量网页去重是搜索引擎的基础') = :utf8_similarity AS same_similarity;

\c simhash_regress_sql_ascii
CREATE EXTENSION simhash;
SELECT getdatabaseencoding(), simhash('plain ASCII text works') IS NOT NULL AS ascii_ok;
\set VERBOSITY default
SELECT simhash(E'not UTF-8: \xff\xfe here');
\set VERBOSITY sqlstate
SELECT simhash(E'not UTF-8: \xff\xfe here');
SELECT simhash_similarity(E'not UTF-8: \xff\xfe here', 'text');
\set VERBOSITY default

\c :regress_db
DROP DATABASE simhash_regress_euc_cn;
DROP DATABASE simhash_regress_sql_ascii;
