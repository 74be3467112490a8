// SPDX-License-Identifier: GPL-2.0

//! Counter configuration (the `N/` directories of oprofilefs) and its validation at `buffer`
//! open; the sample-loss estimate of the perf model.
//!
//! Legacy `drivers/oprofile/oprofile_perf.c` copied the six files of each counter into a
//! `struct op_counter_config` and let perf reject what it could not do, which on ARM meant an
//! event silently counting nothing. Here the model validates first against the event table
//! ([`super::events`]) and names the counter and the reason.

use super::events::{self, CpuModel};
use core::fmt;

/// One counter directory's values (legacy `struct op_counter_config`), written as ulongs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterConfig {
    /// `enabled`: 0 or 1.
    pub enabled: u64,
    /// `event`: event number of the model's table.
    pub event: u64,
    /// `count`: sampling period in events; 0 means counting only (no samples, see `N/total`).
    pub count: u64,
    /// `unit_mask`: must be 0 on ARMv7.
    pub unit_mask: u64,
    /// `kernel`: count in kernel mode (0 or 1).
    pub kernel: u64,
    /// `user`: count in user mode (0 or 1).
    pub user: u64,
}

impl CounterConfig {
    /// Values of a fresh counter directory: disabled, event 0, count 0, unit mask 0, kernel and
    /// user 1. (Legacy zero-initialised `kernel`/`user` but ignored them on ARM; 1 keeps scripts
    /// that never write them counting both modes.)
    pub const DEFAULT: CounterConfig = CounterConfig { enabled: 0, event: 0, count: 0, unit_mask: 0, kernel: 1, user: 1 };
}

/// A file of a counter directory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Enabled,
    Event,
    Count,
    UnitMask,
    Kernel,
    User,
}

impl Field {
    /// Every writable field, in the order of the legacy directory.
    pub const ALL: [Field; 6] = [Field::Enabled, Field::Event, Field::Count, Field::UnitMask, Field::Kernel, Field::User];

    /// File name (NUL-terminated for the kernel's file creation).
    pub fn name(self) -> &'static core::ffi::CStr {
        match self {
            Field::Enabled => c"enabled",
            Field::Event => c"event",
            Field::Count => c"count",
            Field::UnitMask => c"unit_mask",
            Field::Kernel => c"kernel",
            Field::User => c"user",
        }
    }

    /// Values a write may set; others are `EINVAL` at once. Events and counts get the
    /// model-specific checks of [`validate`] at `buffer` open.
    pub fn range(self) -> (u64, u64) {
        match self {
            Field::Enabled | Field::Kernel | Field::User => (0, 1),
            Field::Event => (0, 0xFFFF),
            Field::Count => (0, u64::from(u32::MAX)),
            Field::UnitMask => (0, 0xFF),
        }
    }

    /// The field's value in `c`.
    pub fn get(self, c: &CounterConfig) -> u64 {
        match self {
            Field::Enabled => c.enabled,
            Field::Event => c.event,
            Field::Count => c.count,
            Field::UnitMask => c.unit_mask,
            Field::Kernel => c.kernel,
            Field::User => c.user,
        }
    }

    /// Sets the field in `c`.
    pub fn set(self, c: &mut CounterConfig, v: u64) {
        match self {
            Field::Enabled => c.enabled = v,
            Field::Event => c.event = v,
            Field::Count => c.count = v,
            Field::UnitMask => c.unit_mask = v,
            Field::Kernel => c.kernel = v,
            Field::User => c.user = v,
        }
    }
}

/// Why a configuration cannot be set up; the module logs it and fails the `buffer` open with
/// `EINVAL`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigError {
    /// No counter has `enabled` = 1.
    NoCounterEnabled,
    /// `event` is not in the model's table.
    UnknownEvent { counter: usize, event: u64 },
    /// The event exists but not on this counter (`allowed`: bit mask of counters).
    WrongCounter { counter: usize, event: &'static str, allowed: u32 },
    /// `count` is non-zero and below the event's minimum.
    CountTooLow { counter: usize, event: &'static str, count: u64, minimum: u32 },
    /// `unit_mask` is not 0.
    BadUnitMask { counter: usize, unit_mask: u64 },
    /// `kernel` and `user` are both 0: the counter would count nothing.
    NoMode { counter: usize },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::NoCounterEnabled => f.write_str("no counter enabled (write 1 to N/enabled)"),
            ConfigError::UnknownEvent { counter, event } => {
                write!(f, "counter {counter}: event {event:#x} is not an event of this CPU type (see `oprof events`)")
            }
            ConfigError::WrongCounter { counter, event, allowed } => {
                write!(f, "counter {counter}: event {event} cannot be counted on this counter (allowed counters: ")?;
                events::write_counter_list(f, allowed)?;
                f.write_str(")")
            }
            ConfigError::CountTooLow { counter, event, count, minimum } => {
                write!(f, "counter {counter}: count {count} is below the minimum {minimum} of {event} (0 = counting only)")
            }
            ConfigError::BadUnitMask { counter, unit_mask } => {
                write!(f, "counter {counter}: unit_mask {unit_mask:#x} is invalid (ARMv7 events take no unit mask: 0)")
            }
            ConfigError::NoMode { counter } => {
                write!(f, "counter {counter}: kernel and user are both 0, it would count nothing")
            }
        }
    }
}

/// Checks the enabled counters of `configs` (index = counter number; `configs.len()` counters
/// exist) against `model`'s table. Returns the number of enabled counters, or the error of the
/// lowest-numbered bad counter.
pub fn validate(model: &CpuModel, configs: &[CounterConfig]) -> Result<usize, ConfigError> {
    let n = configs.len() as u32;
    let mut enabled = 0;
    for (counter, c) in configs.iter().enumerate() {
        if c.enabled == 0 {
            continue;
        }
        enabled += 1;
        let e = model.event(c.event).ok_or(ConfigError::UnknownEvent { counter, event: c.event })?;
        let allowed = model.counter_mask(e, n);
        if counter >= 32 || allowed & (1 << counter) == 0 {
            return Err(ConfigError::WrongCounter { counter, event: e.name, allowed });
        }
        if c.count != 0 && c.count < u64::from(e.minimum) {
            return Err(ConfigError::CountTooLow { counter, event: e.name, count: c.count, minimum: e.minimum });
        }
        if c.unit_mask != 0 {
            return Err(ConfigError::BadUnitMask { counter, unit_mask: c.unit_mask });
        }
        if c.kernel == 0 && c.user == 0 {
            return Err(ConfigError::NoMode { counter });
        }
    }
    if enabled == 0 {
        return Err(ConfigError::NoCounterEnabled);
    }
    Ok(enabled)
}

/// `n / d` for `u64` with shifts and subtractions only: 32-bit ARM kernels export no 64-bit
/// division helper (`__aeabi_uldivmod`). `d` = 0 gives 0.
pub fn div_u64(n: u64, d: u64) -> u64 {
    if d == 0 {
        return 0;
    }
    if n < d {
        return 0;
    }
    let shift = d.leading_zeros() - n.leading_zeros();
    let mut q = 0u64;
    let mut r = n;
    let mut s = shift as i32;
    while s >= 0 {
        let ds = d << s;
        if r >= ds {
            r -= ds;
            q |= 1 << s;
        }
        s -= 1;
    }
    q
}

/// Samples one perf event lost, from its count: `total` events counted with sampling period
/// `period` mean `total / period` overflows, and the overflow handler ran `handled` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Losses {
    /// Every overflow, when the handler never ran: the PMU raised no overflow interrupt.
    pub no_irq: u64,
    /// Overflows beyond the handled ones when some ran: an interrupt came more than a period
    /// late, and the ARM PMU driver restarts the period instead of sampling each missed one.
    /// One overflow may be in flight when the counter is read, so one is forgiven.
    pub overrun: u64,
}

/// Computes [`Losses`]; `period` = 0 (counting only) loses nothing.
pub fn losses(total: u64, period: u64, handled: u64) -> Losses {
    if period == 0 {
        return Losses::default();
    }
    let expected = div_u64(total, period);
    if handled == 0 {
        Losses { no_irq: expected, overrun: 0 }
    } else {
        Losses { no_irq: 0, overrun: expected.saturating_sub(handled.saturating_add(1)) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::string::ToString;

    fn a8() -> &'static CpuModel {
        CpuModel::by_cpu_type("arm/armv7").unwrap()
    }

    fn on(event: u64, count: u64) -> CounterConfig {
        CounterConfig { enabled: 1, event, count, ..CounterConfig::DEFAULT }
    }

    #[test]
    fn valid_configurations() {
        let mut c = [CounterConfig::DEFAULT; 5];
        c[0] = on(0xFF, 100_000);
        assert_eq!(validate(a8(), &c), Ok(1));
        c[3] = on(0x03, 500);
        assert_eq!(validate(a8(), &c), Ok(2));
        c[4] = on(0x44, 0); // counting only: no minimum
        assert_eq!(validate(a8(), &c), Ok(3));
        c[4].user = 0;
        assert_eq!(validate(a8(), &c), Ok(3));
    }

    #[test]
    fn every_error_names_the_counter() {
        let base = [CounterConfig::DEFAULT; 5];
        assert_eq!(validate(a8(), &base), Err(ConfigError::NoCounterEnabled));
        let cases: [(usize, CounterConfig, &str); 6] = [
            (1, on(0x99, 1000), "counter 1: event 0x99 is not an event"),
            (0, on(0x03, 1000), "counter 0: event L1D_CACHE_REFILL cannot be counted on this counter (allowed counters: 1, 2, 3, 4)"),
            (2, on(0xFF, 100_000), "counter 2: event CPU_CYCLES cannot be counted on this counter (allowed counters: 0)"),
            (0, on(0xFF, 99_999), "counter 0: count 99999 is below the minimum 100000 of CPU_CYCLES"),
            (1, CounterConfig { unit_mask: 2, ..on(0x03, 500) }, "counter 1: unit_mask 0x2 is invalid"),
            (4, CounterConfig { kernel: 0, user: 0, ..on(0x03, 500) }, "counter 4: kernel and user are both 0"),
        ];
        for (counter, cfg, want) in cases {
            let mut c = base;
            c[counter] = cfg;
            let msg = validate(a8(), &c).unwrap_err().to_string();
            assert!(msg.starts_with(want), "{msg:?} does not start with {want:?}");
        }
    }

    #[test]
    fn fewer_hardware_counters_restrict_the_mask() {
        let a15 = CpuModel::by_cpu_type("arm/armv7-ca15").unwrap();
        let mut c = [CounterConfig::DEFAULT; 3];
        c[2] = on(0x11, 500);
        assert_eq!(validate(a15, &c), Ok(1));
        let mut c = [CounterConfig::DEFAULT; 7];
        c[6] = on(0x11, 500);
        assert_eq!(validate(a15, &c), Ok(1));
    }

    #[test]
    fn division_matches_hardware_division() {
        let vals = [0u64, 1, 2, 3, 7, 10, 499, 500, 100_000, 1 << 31, u32::MAX as u64, 1 << 32, 12_345_678_901_234, u64::MAX - 1, u64::MAX];
        for &n in &vals {
            for &d in &vals {
                let want = n.checked_div(d).unwrap_or(0);
                assert_eq!(div_u64(n, d), want, "{n} / {d}");
            }
        }
    }

    #[test]
    fn sampling_losses() {
        let l = |no_irq, overrun| Losses { no_irq, overrun };
        assert_eq!(losses(1_000_000, 0, 0), l(0, 0), "counting only");
        assert_eq!(losses(1_000_000, 100_000, 0), l(10, 0), "no interrupt at all");
        assert_eq!(losses(1_000_000, 100_000, 10), l(0, 0));
        assert_eq!(losses(1_000_000, 100_000, 9), l(0, 0), "one in flight is forgiven");
        assert_eq!(losses(1_000_000, 100_000, 5), l(0, 4), "late interrupts");
        assert_eq!(losses(99_999, 100_000, 0), l(0, 0));
    }
}
