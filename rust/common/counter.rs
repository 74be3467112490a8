// SPDX-License-Identifier: GPL-2.0

//! Counter configuration (the `N/` directories of oprofilefs) and its validation at `buffer`
//! open; the perf model's checks of its counter readings and its sample-loss estimate.
//!
//! Legacy `drivers/oprofile/oprofile_perf.c` copied the six files of each counter into a
//! `struct op_counter_config` and let perf reject what it could not do, which on ARM meant an
//! event silently counting nothing. Here the model validates first against the event table
//! ([`super::events`]) and names the counter and the reason.

use super::events::{self, CpuModel};
use super::parse::div_rem_10;
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
    pub const DEFAULT: CounterConfig = CounterConfig {
        enabled: 0,
        event: 0,
        count: 0,
        unit_mask: 0,
        kernel: 1,
        user: 1,
    };
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
    pub const ALL: [Field; 6] = [
        Field::Enabled,
        Field::Event,
        Field::Count,
        Field::UnitMask,
        Field::Kernel,
        Field::User,
    ];

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
    WrongCounter {
        counter: usize,
        event: &'static str,
        allowed: u32,
    },
    /// `count` is non-zero and below the event's minimum.
    CountTooLow {
        counter: usize,
        event: &'static str,
        count: u64,
        minimum: u32,
    },
    /// `unit_mask` is not 0.
    BadUnitMask { counter: usize, unit_mask: u64 },
    /// `kernel` and `user` are both 0: the counter would count nothing.
    NoMode { counter: usize },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            ConfigError::NoCounterEnabled => {
                f.write_str("no counter enabled (write 1 to N/enabled)")
            }
            ConfigError::UnknownEvent { counter, event } => {
                write!(f, "counter {counter}: event {event:#x} is not an event of this CPU type (see `oprof events`)")
            }
            ConfigError::WrongCounter {
                counter,
                event,
                allowed,
            } => {
                write!(f, "counter {counter}: event {event} cannot be counted on this counter (allowed counters: ")?;
                events::write_counter_list(f, allowed)?;
                f.write_str(")")
            }
            ConfigError::CountTooLow {
                counter,
                event,
                count,
                minimum,
            } => {
                write!(f, "counter {counter}: count {count} is below the minimum {minimum} of {event} (0 = counting only)")
            }
            ConfigError::BadUnitMask { counter, unit_mask } => {
                write!(f, "counter {counter}: unit_mask {unit_mask:#x} is invalid (ARMv7 events take no unit mask: 0)")
            }
            ConfigError::NoMode { counter } => {
                write!(
                    f,
                    "counter {counter}: kernel and user are both 0, it would count nothing"
                )
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
        let e = model.event(c.event).ok_or(ConfigError::UnknownEvent {
            counter,
            event: c.event,
        })?;
        let allowed = model.counter_mask(e, n);
        if counter >= 32 || allowed & (1 << counter) == 0 {
            return Err(ConfigError::WrongCounter {
                counter,
                event: e.name,
                allowed,
            });
        }
        if c.count != 0 && c.count < u64::from(e.minimum) {
            return Err(ConfigError::CountTooLow {
                counter,
                event: e.name,
                count: c.count,
                minimum: e.minimum,
            });
        }
        if c.unit_mask != 0 {
            return Err(ConfigError::BadUnitMask {
                counter,
                unit_mask: c.unit_mask,
            });
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
    losses_seen(total, period, handled, handled > 0)
}

/// [`losses`] of `handled` handler calls out of the `total` events' periods, where
/// `interrupted` says whether the handler ran at all (also outside those events: see
/// [`EventCount::losses`]).
fn losses_seen(total: u64, period: u64, handled: u64, interrupted: bool) -> Losses {
    if period == 0 {
        return Losses::default();
    }
    let expected = div_u64(total, period);
    if !interrupted {
        Losses {
            no_irq: expected,
            overrun: 0,
        }
    } else {
        Losses {
            no_irq: 0,
            overrun: expected.saturating_sub(handled.saturating_add(1)),
        }
    }
}

/// One reading of a perf event (one counter on one CPU): `perf_event_read_value`'s count and
/// time running (ns), both since the event was created.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reading {
    /// Events counted.
    pub value: u64,
    /// ns the event was on the PMU counting (perf's `time_running`).
    pub running_ns: u64,
}

/// The most CPU cycles per ns of time running a cycle event ([`counts_cycles`]) can count: a
/// 10 GHz clock. One increment per cycle is the event's definition; no ARM core runs at half
/// that clock. The only bound on hardware the module assumes, and only for cycle events.
pub const MAX_CYCLES_PER_NS: u64 = 10;

/// Events a reading of a cycle event may show beyond [`MAX_CYCLES_PER_NS`] × its time running
/// since the previous one: half a 32-bit wrap. perf stamps an event's time running, then reads
/// its counter (`__perf_event_read`, with interrupts off on the event's CPU), so each end of an
/// interval counts the events between the stamp and the read as well; this allows 2^31 of them
/// (0.2 s at 10 GHz). A 32-bit counter that steps back by `d` events reads as a wrap: perf
/// adds `2^32 - d`; that is caught while `d`, less the cycles the interval allows, stays below
/// 2^31 (a step back of about 1 s of cycles within a 100 ms refresh interval at 1 GHz).
pub const READ_SKEW_EVENTS: u64 = 1 << 31;

/// Whether event number `event` counts CPU cycles, one per cycle: ARMv7's `0xFF` (the cycle
/// counter CCNT) and `0x11` (cycles on an event counter, `CLOCK_CYCLES` in the ARMv7 tables),
/// ARMv8's `0x11` (`CPU_CYCLES`). Other events may count several per cycle: the module knows no
/// bound on their rate.
pub fn counts_cycles(event: u64) -> bool {
    matches!(event, 0x11 | 0xFF)
}

/// Why [`check_reading`] rejected a reading.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rejection {
    /// The count is lower than at the previous reading: perf only ever adds to an event's
    /// count (each update adds the counter's advance, masked to its width).
    SteppedBack { previous: u64, now: u64 },
    /// A cycle event rose by more than [`MAX_CYCLES_PER_NS`] × `running_ns` +
    /// [`READ_SKEW_EVENTS`] in the interval, `running_ns` being its time running then: as a
    /// 32-bit counter that stepped back reads (one wrap too many).
    TooFast { increase: u64, running_ns: u64 },
}

/// A `u64` written in decimal with 32-bit divisions only ([`div_rem_10`]): `core::fmt` of a
/// `u64` above 9999 calls the 64-bit division helper 32-bit ARM kernels lack.
pub struct Count(pub u64);

impl fmt::Display for Count {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // u64::MAX has 20 digits; they are filled from the end.
        let mut digits = [0u8; 20];
        let (mut n, mut v) = (digits.len(), self.0);
        while let Some(i) = n.checked_sub(1) {
            let (q, r) = div_rem_10(v);
            if let Some(d) = digits.get_mut(i) {
                *d = b'0' + r;
            }
            n = i;
            v = q;
            if v == 0 {
                break;
            }
        }
        // ASCII digits only.
        f.write_str(
            digits
                .get(n..)
                .and_then(|d| core::str::from_utf8(d).ok())
                .unwrap_or("?"),
        )
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Rejection::SteppedBack { previous, now } => write!(
                f,
                "stepped back from {} to {} events (perf's count never decreases)",
                Count(previous),
                Count(now)
            ),
            Rejection::TooFast { increase, running_ns } => write!(
                f,
                "rose by {} cycles in {} ns of counting, more than {} per ns plus 2^31 (a 32-bit counter that stepped back reads as a wrap too many)",
                Count(increase),
                Count(running_ns),
                MAX_CYCLES_PER_NS
            ),
        }
    }
}

/// Checks reading `now` of an event against its previous reading `prev` (the default
/// [`Reading`] before the first: the event starts at 0); `cycles`: the event counts CPU cycles
/// ([`counts_cycles`]). Returns the increase, or why it cannot be right: only what the
/// readings prove, see [`Rejection`].
pub fn check_reading(prev: Reading, now: Reading, cycles: bool) -> Result<u64, Rejection> {
    let Some(increase) = now.value.checked_sub(prev.value) else {
        return Err(Rejection::SteppedBack {
            previous: prev.value,
            now: now.value,
        });
    };
    if cycles {
        let running_ns = now.running_ns.saturating_sub(prev.running_ns);
        let allowed = running_ns
            .saturating_mul(MAX_CYCLES_PER_NS)
            .saturating_add(READ_SKEW_EVENTS);
        if increase > allowed {
            return Err(Rejection::TooFast {
                increase,
                running_ns,
            });
        }
    }
    Ok(increase)
}

/// One perf event's count as the perf model keeps it: the sum of its readings' accepted
/// increases. A rejected reading ([`check_reading`]) leaves its interval (since the previous
/// reading) out of the total, the time running and the handler calls the losses are estimated
/// from, and becomes the base of the next increase.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct EventCount {
    /// The last reading, as perf gave it.
    pub last: Reading,
    /// Overflow handler calls when it was taken.
    pub last_handled: u64,
    /// Events of the accepted intervals: the event's share of `N/total`.
    pub total: u64,
    /// Their time running, ns: its share of `N/time_running`.
    pub running_ns: u64,
    /// Overflow handler calls in rejected intervals.
    pub handled_rejected: u64,
    /// Rejected readings.
    pub rejected: u64,
}

impl EventCount {
    /// Takes reading `now`, after which the event's overflow handler had run `handled` times
    /// in all; `cycles`: see [`check_reading`]. Returns why the reading was rejected, if it was.
    pub fn update(&mut self, now: Reading, handled: u64, cycles: bool) -> Option<Rejection> {
        let calls = handled.saturating_sub(self.last_handled);
        let verdict = check_reading(self.last, now, cycles);
        match verdict {
            Ok(increase) => {
                self.total = self.total.saturating_add(increase);
                self.running_ns = self
                    .running_ns
                    .saturating_add(now.running_ns.saturating_sub(self.last.running_ns));
            }
            Err(_) => {
                self.handled_rejected = self.handled_rejected.saturating_add(calls);
                self.rejected = self.rejected.saturating_add(1);
            }
        }
        self.last = now;
        self.last_handled = handled;
        verdict.err()
    }

    /// The samples lost in the accepted intervals ([`losses`]): their periods against the
    /// handler calls in them. A rejected interval's count is not known, so neither its periods
    /// nor its samples enter.
    pub fn losses(&self, period: u64) -> Losses {
        let handled = self.last_handled.saturating_sub(self.handled_rejected);
        losses_seen(self.total, period, handled, self.last_handled > 0)
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
        CounterConfig {
            enabled: 1,
            event,
            count,
            ..CounterConfig::DEFAULT
        }
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
            assert!(
                msg.starts_with(want),
                "{msg:?} does not start with {want:?}"
            );
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
        let vals = [
            0u64,
            1,
            2,
            3,
            7,
            10,
            499,
            500,
            100_000,
            1 << 31,
            u32::MAX as u64,
            1 << 32,
            12_345_678_901_234,
            u64::MAX - 1,
            u64::MAX,
        ];
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
        assert_eq!(
            losses(1_000_000, 100_000, 0),
            l(10, 0),
            "no interrupt at all"
        );
        assert_eq!(losses(1_000_000, 100_000, 10), l(0, 0));
        assert_eq!(
            losses(1_000_000, 100_000, 9),
            l(0, 0),
            "one in flight is forgiven"
        );
        assert_eq!(losses(1_000_000, 100_000, 5), l(0, 4), "late interrupts");
        assert_eq!(losses(99_999, 100_000, 0), l(0, 0));
    }

    const MS: u64 = 1_000_000;
    const WRAP: u64 = 1 << 32;

    fn at(value: u64, running_ns: u64) -> Reading {
        Reading { value, running_ns }
    }

    #[test]
    fn cycle_events() {
        for e in [0x11, 0xFF] {
            assert!(counts_cycles(e), "{e:#x}");
        }
        for e in [0x00, 0x03, 0x08, 0x10, 0x1D, 0x1B] {
            assert!(!counts_cycles(e), "{e:#x}");
        }
    }

    #[test]
    fn readings_that_can_be_right_are_taken() {
        // 1 GHz over 100 ms, the first reading from the event's creation.
        assert_eq!(
            check_reading(Reading::default(), at(100 * MS, 100 * MS), true),
            Ok(100 * MS)
        );
        // No cycles at all (an idle CPU's cycle counter stops in WFI on hardware).
        assert_eq!(check_reading(at(5, 10), at(5, 100 * MS), true), Ok(0));
        // The bound itself: 10 per ns + 2^31.
        let edge = 10 * 100 * MS + READ_SKEW_EVENTS;
        assert_eq!(
            check_reading(at(7, MS), at(7 + edge, 101 * MS), true),
            Ok(edge)
        );
        // A non-cycle event has no rate bound: a large rise is taken.
        assert_eq!(
            check_reading(at(0, 0), at(3 * WRAP, MS), false),
            Ok(3 * WRAP)
        );
        // Read twice within no time: the skew allowance alone.
        assert_eq!(
            check_reading(at(10, 50), at(10 + READ_SKEW_EVENTS, 50), true),
            Ok(READ_SKEW_EVENTS)
        );
    }

    #[test]
    fn a_reading_that_steps_back_is_rejected() {
        let r = check_reading(at(1_000_000, 5 * MS), at(999_999, 6 * MS), true);
        assert_eq!(
            r,
            Err(Rejection::SteppedBack {
                previous: 1_000_000,
                now: 999_999
            })
        );
        // Whatever the event.
        assert!(check_reading(at(1, 0), at(0, 1), false).is_err());
    }

    #[test]
    fn a_wrap_too_many_is_rejected() {
        // QEMU virt-a15 (DEVELOPERS.md): the 32-bit counter of event 0x11 stepped back ~97 ms
        // of 1 GHz cycles and perf added 2^32 - 97e6 to its count within a 100 ms interval.
        let prev = at(7_000 * MS, 7_000 * MS);
        let now = at(7_000 * MS + 100 * MS + WRAP - 97 * MS, 7_100 * MS);
        assert_eq!(
            check_reading(prev, now, true),
            Err(Rejection::TooFast {
                increase: WRAP + 3 * MS,
                running_ns: 100 * MS
            })
        );
        // One past the bound is rejected; a non-cycle event's is taken (nothing proves it wrong).
        let edge = 10 * 100 * MS + READ_SKEW_EVENTS;
        assert!(check_reading(at(0, 0), at(edge + 1, 100 * MS), true).is_err());
        assert_eq!(check_reading(prev, now, false), Ok(WRAP + 3 * MS));
        let msg = check_reading(prev, now, true).unwrap_err().to_string();
        assert_eq!(
            msg,
            "rose by 4297967296 cycles in 100000000 ns of counting, more than 10 per ns plus 2^31 (a 32-bit counter that stepped back reads as a wrap too many)"
        );
    }

    #[test]
    fn count_formats_every_u64() {
        for v in [0u64, 7, 9999, 10_000, 4_294_967_296, u64::MAX] {
            assert_eq!(Count(v).to_string(), v.to_string());
        }
    }

    #[test]
    fn rejected_intervals_do_not_inflate_the_totals_or_the_losses() {
        // One CPU's 0x11 counter sampling every 1M cycles at 1 GHz, 100 handler calls per
        // 100 ms refresh, and in the third interval the QEMU step back.
        let period = MS;
        let mut c = EventCount::default();
        let mut raw = 0u64;
        let mut handled = 0u64;
        for i in 1..=10u64 {
            raw += 100 * MS + if i == 3 { WRAP - 97 * MS } else { 0 };
            handled += 100;
            let r = c.update(at(raw, i * 100 * MS), handled, true);
            assert_eq!(r.is_some(), i == 3, "reading {i}: {r:?}");
        }
        assert_eq!(c.rejected, 1);
        assert_eq!(c.total, 9 * 100 * MS, "nine accepted intervals");
        assert_eq!(c.running_ns, 9 * 100 * MS);
        assert_eq!(c.handled_rejected, 100);
        assert_eq!(
            c.losses(period),
            Losses {
                no_irq: 0,
                overrun: 0
            }
        );
        // Taken at face value the wrap would have made 4196 periods "lost".
        assert_eq!(
            losses(raw, period, handled),
            Losses {
                no_irq: 0,
                overrun: 4196
            }
        );

        // A reading that steps back becomes the base of the next one.
        let mut c = EventCount::default();
        assert_eq!(c.update(at(500, 10), 0, false), None);
        assert!(c.update(at(400, 20), 0, false).is_some());
        assert_eq!(c.update(at(450, 30), 0, false), None);
        assert_eq!((c.total, c.running_ns, c.rejected), (550, 20, 1));
    }

    #[test]
    fn no_interrupt_stays_no_interrupt() {
        // The handler never ran: every period of the accepted intervals is `no_irq`.
        let mut c = EventCount::default();
        c.update(at(1_000_000, 10 * MS), 0, true);
        assert_eq!(
            c.losses(100_000),
            Losses {
                no_irq: 10,
                overrun: 0
            }
        );
        // It ran, but only in a rejected interval: the accepted ones lost their periods late,
        // not for want of an interrupt.
        let mut c = EventCount::default();
        c.update(at(1_000_000, 10 * MS), 0, true);
        c.update(at(1_000_000 + WRAP, 11 * MS), 3, true);
        assert_eq!(
            c.losses(100_000),
            Losses {
                no_irq: 0,
                overrun: 9
            }
        );
    }
}
