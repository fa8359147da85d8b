//! The expected work of exact radius lookups over uniformly random codes, per segment width
//! (`docs/design/codes-of-any-length.md`): `cargo run -p simhash-core --example multi_index_estimates`.

use simhash_core::code_index::{Layout, DEFAULT_INDEXED_SEGMENTS};
use simhash_core::multi_index::{expected_work, segment_radii, units, Costs, SegmentPlan};

fn main() {
    for (bits, rows) in [(256u32, 10_000_000u64), (256, 1_000_000), (1024, 1_000_000)] {
        println!("\n{bits}-bit codes, {rows} rows (radius: segments x radius, - = not probed)");
        println!("| k | width | segments | radii | probes | candidates | cost |");
        println!("|---:|---:|---|---|---:|---:|---:|");
        for k in [8u32, 16, 32, 64] {
            for width in [16u32, 20, 22, 24, 28, 32] {
                let plan = SegmentPlan::with_width(bits, width).unwrap();
                let Some(radii) = segment_radii(&plan, k, rows, Costs::default()) else {
                    println!("| {k} | {width} | - | scan | | | |");
                    continue;
                };
                let work = expected_work(&plan, &radii, rows);
                println!(
                    "| {k} | {width} | {}x{}+{} | {} | {:.0} | {:.0} | {:.0} |",
                    plan.count - 1,
                    plan.width,
                    plan.last_width,
                    radii_text(&plan, &radii),
                    work.probes,
                    work.candidates,
                    work.cost(Costs::default())
                );
            }
        }
        // The radii an index of this size takes (`code_index::Layout::radii`: extra units for the
        // slack filter) and the codes it reads.
        let layout = Layout::for_table(bits, rows, DEFAULT_INDEXED_SEGMENTS).unwrap();
        println!(
            "\nThe index's layout ({} indexed segments of {} bits, last {}), with the slack filter:",
            layout.indexed,
            layout.plan.width,
            layout.indexed_plan().last_width
        );
        println!("| k | units | radii | probes | candidates met | codes read | without the filter: probes | candidates = codes read |");
        println!("|---:|---:|---|---:|---:|---:|---:|---:|");
        for k in [8u32, 16, 32] {
            let (Some(radii), Some(plain)) =
                (layout.radii(k, rows), segment_radii(&layout.indexed_plan(), k, rows, Costs::default()))
            else {
                continue;
            };
            let work = layout.work(&radii, k, rows);
            let before = layout.work(&plain, k, rows);
            println!(
                "| {k} | {} | {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
                units(&radii),
                radii_text(&layout.indexed_plan(), &radii),
                work.probes,
                work.candidates,
                work.checks,
                before.probes,
                before.candidates
            );
        }
    }
}

/// Radii as `count x width b: radius`, `-` = not probed.
fn radii_text(plan: &SegmentPlan, radii: &[Option<u32>]) -> String {
    let mut counts: Vec<(Option<u32>, u32, u32)> = Vec::new();
    for (i, r) in radii.iter().enumerate() {
        let w = plan.width_of(i as u32);
        match counts.iter_mut().find(|(rr, ww, _)| rr == r && *ww == w) {
            Some(c) => c.2 += 1,
            None => counts.push((*r, w, 1)),
        }
    }
    let parts: Vec<String> =
        counts.iter().map(|(r, w, n)| format!("{n}x{w}b:{}", r.map_or("-".to_string(), |r| r.to_string()))).collect();
    parts.join(" ")
}
