//! The near-duplicate constraint's limits.

/// The largest radius the constraint handles: that of the exact segment probes (a pair within
/// `k <= 11` bits shares a segment within `k / 4` bits, see [`crate::probes`]).
pub const MAX_DEDUP_RADIUS: u32 = crate::probes::MAX_PROBED_RADIUS;
