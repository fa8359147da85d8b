//! Small PostgreSQL helpers the subsystems share: what differs between PostgreSQL majors
//! (`compat`), whether Citus holds a table's rows elsewhere (`citus`), errors with SQLSTATEs
//! (`errors`), planner nodes read and built (`nodes`), catalog names for messages (`names`),
//! table positions (`tid`), the join selectivity of a symmetric radius test
//! written twice (`twin`) and sorts that spill to disk beyond their memory (`tuplesort`).
//! Nothing here knows about fingerprints.

pub(crate) mod citus;
pub(crate) mod compat;
pub(crate) mod errors;
pub(crate) mod names;
pub(crate) mod nodes;
pub(crate) mod scratch;
pub(crate) mod tid;
pub(crate) mod tuplesort;
pub(crate) mod twin;
