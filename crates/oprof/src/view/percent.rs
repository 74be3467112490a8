//! Shares of a total, as every view prints them.

/// `n` as a percentage of `of`; 0 when `of` is 0 (an empty profile has no shares).
pub fn percent(n: u64, of: u64) -> f64 {
    if of == 0 {
        0.0
    } else {
        n as f64 * 100.0 / of as f64
    }
}

#[cfg(test)]
mod tests {
    use super::percent;

    #[test]
    fn shares() {
        assert_eq!(percent(0, 0), 0.0);
        assert_eq!(percent(7, 0), 0.0);
        assert_eq!(percent(1, 4), 25.0);
        assert_eq!(percent(3, 3), 100.0);
    }
}
