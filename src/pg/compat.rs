//! The differences between the PostgreSQL majors this extension builds for (15 and 18), in one
//! place: everywhere else calls these.

use pgrx::pg_sys::{self, Node, Oid};

/// Attribute `i` (0-based) of a tuple descriptor, PostgreSQL's `TupleDescAttr`.
///
/// # Safety
///
/// `desc` is a valid tuple descriptor with more than `i` attributes.
pub(crate) unsafe fn tuple_desc_attr(desc: pg_sys::TupleDesc, i: usize) -> pg_sys::FormData_pg_attribute {
    unsafe {
        #[cfg(feature = "pg15")]
        let attributes = (*desc).attrs.as_ptr();
        // Since 18 the full attributes follow the array of compact ones.
        #[cfg(feature = "pg18")]
        let attributes =
            (*desc).compact_attrs.as_ptr().add((*desc).natts as usize).cast::<pg_sys::FormData_pg_attribute>();
        *attributes.add(i)
    }
}

/// Whether a set is empty. (Since 16 an empty set is always NULL, and `bms_is_empty` a macro.)
///
/// # Safety
///
/// `set` is NULL or a valid set.
pub(crate) unsafe fn bms_is_empty(set: *const pg_sys::Bitmapset) -> bool {
    #[cfg(feature = "pg15")]
    return unsafe { pg_sys::bms_is_empty(set) };
    #[cfg(feature = "pg18")]
    return set.is_null();
}

/// `index_beginscan` without instrumentation (an argument since 18).
///
/// # Safety
///
/// As for `index_beginscan`: open relations and a snapshot valid for the scan.
pub(crate) unsafe fn index_beginscan(
    heap: pg_sys::Relation,
    index: pg_sys::Relation,
    snapshot: pg_sys::Snapshot,
    nkeys: i32,
    norderbys: i32,
) -> pg_sys::IndexScanDesc {
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::index_beginscan(heap, index, snapshot, nkeys, norderbys);
        #[cfg(feature = "pg18")]
        return pg_sys::index_beginscan(heap, index, snapshot, std::ptr::null_mut(), nkeys, norderbys);
    }
}

/// The table's primary key index, or InvalidOid; a deferrable primary key is not one (as the row
/// of a deferred key may not be unique yet; 18 asks, 15 never returns it).
///
/// # Safety
///
/// `rel` is an open relation.
pub(crate) unsafe fn primary_key_index(rel: pg_sys::Relation) -> Oid {
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::RelationGetPrimaryKeyIndex(rel);
        #[cfg(feature = "pg18")]
        return pg_sys::RelationGetPrimaryKeyIndex(rel, false);
    }
}

/// `node`, an expression of `child_rel`'s top parent, in terms of `child_rel` (partitionwise joins).
///
/// # Safety
///
/// In the planner: `root` and `child_rel` are valid, `node` is an expression of the top parent.
pub(crate) unsafe fn adjust_to_child(
    root: *mut pg_sys::PlannerInfo,
    node: *mut Node,
    child_rel: *mut pg_sys::RelOptInfo,
) -> *mut Node {
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::adjust_appendrel_attrs_multilevel(
            root,
            node,
            (*child_rel).relids,
            (*child_rel).top_parent_relids,
        );
        #[cfg(feature = "pg18")]
        return pg_sys::adjust_appendrel_attrs_multilevel(root, node, child_rel, (*child_rel).top_parent);
    }
}

/// PostgreSQL's `RelationNeedsWAL`: a permanent relation, unless `wal_level` is minimal and its
/// storage was created in this transaction (then it is fsynced at commit instead, and must not be
/// WAL-logged: replaying such records after a crash would undo later changes).
///
/// # Safety
///
/// `rel` is an open relation.
pub(crate) unsafe fn relation_needs_wal(rel: pg_sys::Relation) -> bool {
    unsafe {
        let permanent = (*(*rel).rd_rel).relpersistence == pg_sys::RELPERSISTENCE_PERMANENT as core::ffi::c_char;
        let wal_needed = pg_sys::wal_level >= pg_sys::WalLevel::WAL_LEVEL_REPLICA as i32;
        #[cfg(feature = "pg15")]
        let new_storage = (*rel).rd_firstRelfilenodeSubid;
        #[cfg(feature = "pg18")]
        let new_storage = (*rel).rd_firstRelfilelocatorSubid;
        permanent
            && (wal_needed
                || ((*rel).rd_createSubid == INVALID_SUBTRANSACTION && new_storage == INVALID_SUBTRANSACTION))
    }
}

/// `InvalidSubTransactionId`.
const INVALID_SUBTRANSACTION: pg_sys::SubTransactionId = 0;

/// Whether `role` may use schema `namespace` (`pg_namespace_aclcheck`, `object_aclcheck` since 16).
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn may_use_schema(namespace: Oid, role: Oid) -> bool {
    unsafe { schema_privilege(namespace, role, pg_sys::ACL_USAGE as pg_sys::AclMode) }
}

/// Whether `role` may create objects in schema `namespace`.
///
/// # Safety
///
/// In a backend, inside a transaction.
pub(crate) unsafe fn may_create_in_schema(namespace: Oid, role: Oid) -> bool {
    unsafe { schema_privilege(namespace, role, pg_sys::ACL_CREATE as pg_sys::AclMode) }
}

unsafe fn schema_privilege(namespace: Oid, role: Oid, usage: pg_sys::AclMode) -> bool {
    #[cfg(feature = "pg15")]
    let result = unsafe { pg_sys::pg_namespace_aclcheck(namespace, role, usage) };
    #[cfg(feature = "pg18")]
    let result = unsafe { pg_sys::object_aclcheck(pg_sys::NamespaceRelationId, namespace, role, usage) };
    result == pg_sys::AclResult::ACLCHECK_OK
}

/// The inserting transaction of a heap tuple (`HeapTupleHeaderGetXmin`: FrozenTransactionId once
/// frozen).
///
/// # Safety
///
/// `tuple` points to a valid heap tuple header.
pub(crate) unsafe fn heap_tuple_xmin(tuple: *const pg_sys::HeapTupleHeaderData) -> pg_sys::TransactionId {
    unsafe {
        let frozen = pg_sys::HEAP_XMIN_FROZEN as u16;
        if (*tuple).t_infomask & frozen == frozen {
            pg_sys::FrozenTransactionId
        } else {
            (*tuple).t_choice.t_heap.t_xmin
        }
    }
}

/// The relation's file (tablespace, database, file number): what a buffer's tag names.
///
/// # Safety
///
/// `rel` is an open relation.
pub(crate) unsafe fn relation_file(rel: pg_sys::Relation) -> [u32; 3] {
    unsafe {
        #[cfg(feature = "pg15")]
        let file = (*rel).rd_node;
        #[cfg(feature = "pg15")]
        return [file.spcNode.to_u32(), file.dbNode.to_u32(), file.relNode.to_u32()];
        #[cfg(feature = "pg18")]
        let file = (*rel).rd_locator;
        #[cfg(feature = "pg18")]
        return [file.spcOid.to_u32(), file.dbOid.to_u32(), file.relNumber.to_u32()];
    }
}

/// Pins `recent` if it still holds block `block` of the main fork of `rel` (PostgreSQL's
/// `ReadRecentBuffer`, which skips the lookup in the shared buffer mapping table); `false` if not.
///
/// # Safety
///
/// `rel` is an open relation, `recent` a shared buffer number (1..=NBuffers).
pub(crate) unsafe fn read_recent_buffer(
    rel: pg_sys::Relation,
    block: pg_sys::BlockNumber,
    recent: pg_sys::Buffer,
) -> bool {
    unsafe {
        #[cfg(feature = "pg15")]
        let file = (*rel).rd_node;
        #[cfg(feature = "pg18")]
        let file = (*rel).rd_locator;
        pg_sys::ReadRecentBuffer(file, pg_sys::ForkNumber::MAIN_FORKNUM, block, recent)
    }
}

/// The next datum of a sorted tuplesort over datums into `value`, false after the last: on 15 a
/// by-reference datum is the caller's copy (to free), since 16 one the sort keeps until the next
/// call.
///
/// # Safety
///
/// `state` is a sorted tuplesort over datums.
pub(crate) unsafe fn tuplesort_getdatum(
    state: *mut pg_sys::Tuplesortstate,
    value: &mut pg_sys::Datum,
    is_null: &mut bool,
) -> bool {
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::tuplesort_getdatum(state, true, value, is_null, std::ptr::null_mut());
        #[cfg(feature = "pg18")]
        return pg_sys::tuplesort_getdatum(state, true, false, value, is_null, std::ptr::null_mut());
    }
}

/// Whether a path key sorts ascending (`pk_strategy` was replaced by `pk_cmptype` in 18).
///
/// # Safety
///
/// `pathkey` is a valid path key.
pub(crate) unsafe fn pathkey_is_ascending(pathkey: *const pg_sys::PathKey) -> bool {
    unsafe {
        #[cfg(feature = "pg15")]
        return (*pathkey).pk_strategy == pg_sys::BTLessStrategyNumber as i32;
        #[cfg(feature = "pg18")]
        return (*pathkey).pk_cmptype == pg_sys::CompareType::COMPARE_LT;
    }
}

/// The members of equivalence class `ec` that an ordered path of relation `relids` can use: its
/// own and, for a partition (or another child of an append), those translated to that child. Up to
/// 17 the children's members are in `ec_members`; since 18 they are kept apart, per child
/// (`ec_childmembers`), and read through an iterator.
///
/// # Safety
///
/// `ec` is a valid equivalence class of the planner and `relids` a relation's set.
pub(crate) unsafe fn eclass_members(
    ec: *mut pg_sys::EquivalenceClass,
    relids: *mut pg_sys::Bitmapset,
) -> Vec<*mut pg_sys::EquivalenceMember> {
    unsafe {
        #[cfg(feature = "pg15")]
        {
            let _ = relids;
            pgrx::PgList::<pg_sys::EquivalenceMember>::from_pg((*ec).ec_members).iter_ptr().collect()
        }
        #[cfg(feature = "pg18")]
        {
            let mut members = Vec::new();
            let mut iterator: pg_sys::EquivalenceMemberIterator = std::mem::zeroed();
            pg_sys::setup_eclass_member_iterator(&mut iterator, ec, relids);
            loop {
                let member = pg_sys::eclass_member_iterator_next(&mut iterator);
                if member.is_null() {
                    break members;
                }
                members.push(member);
            }
        }
    }
}

/// `make_simple_restrictinfo` (a macro in C, whose function gained arguments in 16): a
/// RestrictInfo for `clause` pushed down to its relation, at `security_level`.
///
/// # Safety
///
/// `root` is the planner's state and `clause` an expression of the query.
pub(crate) unsafe fn make_simple_restrictinfo(
    root: *mut pg_sys::PlannerInfo,
    clause: *mut pg_sys::Expr,
    security_level: pg_sys::Index,
) -> *mut pg_sys::RestrictInfo {
    use std::ptr::null_mut;
    unsafe {
        #[cfg(feature = "pg15")]
        return pg_sys::make_restrictinfo(
            root,
            clause,
            true,
            false,
            false,
            security_level,
            null_mut(),
            null_mut(),
            null_mut(),
        );
        #[cfg(feature = "pg18")]
        return pg_sys::make_restrictinfo(
            root,
            clause,
            true,
            false,
            false,
            false,
            security_level,
            null_mut(),
            null_mut(),
            null_mut(),
        );
    }
}
