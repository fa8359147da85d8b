//! The lookup path's settings: `simhash.enable_rewrite` and `simhash.enable_radius_scan`.

use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

/// `simhash.enable_rewrite`: the planner rewrite of radius tests into index probes.
pub(crate) static ENABLE_REWRITE: GucSetting<bool> = GucSetting::<bool>::new(true);

/// `simhash.enable_radius_scan`: the custom scan that checks distances inside covering indexes.
pub(crate) static ENABLE_RADIUS_SCAN: GucSetting<bool> = GucSetting::<bool>::new(true);

/// Defines the settings; called once per backend from `_PG_init` (through `lookup::init`).
pub(crate) fn define() {
    GucRegistry::define_bool_guc(
        c"simhash.enable_rewrite",
        c"Rewrites radius tests such as fp <~> q <= k into lookups through simhash indexes.",
        c"Off leaves every radius test as written: useful to compare plans and timings.",
        &ENABLE_REWRITE,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_bool_guc(
        c"simhash.enable_radius_scan",
        c"Lets the planner answer radius tests with the SimHash Radius Scan over covering segment indexes.",
        c"Off leaves radius tests to PostgreSQL's own scans (BitmapOr or sequential).",
        &ENABLE_RADIUS_SCAN,
        GucContext::Userset,
        GucFlags::default(),
    );
}
