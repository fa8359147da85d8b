//! A deterministic stream of test values for the core's tests and examples (not a generator of
//! anything stored: the planes of `hyperplanes` have their own, fixed by its documentation).

/// A 64-bit linear congruential generator (Knuth's MMIX constants), with uniform and standard
/// normal values (Box-Muller) drawn from it.
pub struct Lcg(pub u64);

impl Lcg {
    /// A value uniform in (0, 1).
    pub fn uniform(&mut self) -> f64 {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }

    /// A standard normal value.
    pub fn normal(&mut self) -> f64 {
        let (u1, u2) = (self.uniform(), self.uniform());
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// `d` standard normal values.
    pub fn gaussian(&mut self, d: usize) -> Vec<f64> {
        (0..d).map(|_| self.normal()).collect()
    }
}
