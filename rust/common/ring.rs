// SPDX-License-Identifier: GPL-2.0

//! Index math of a single-producer single-consumer ring (the per-CPU sample buffer).
//!
//! `head` (next position to write, advanced by the producer: the CPU's own interrupt handler) and
//! `tail` (next position to read, advanced by the consumer: `buffer_sync` in process context) run
//! modulo `2 * capacity`; the slot of position `p` is `p % capacity`. Counting to twice the
//! capacity tells a full ring (`len == capacity`) from an empty one (`len == 0`) without a spare
//! slot, for any capacity (free-running `u32` counters would need a power of two: `2^32` is not
//! a multiple of, say, 8192 + 1). Capacity must be in `1..=MAX_CAPACITY`.

/// Largest supported capacity in entries (`2 * capacity` must fit a `u32`).
pub const MAX_CAPACITY: u32 = 1 << 30;

/// Position after `pos` in a ring of `capacity` entries.
#[inline]
pub fn advance(pos: u32, capacity: u32) -> u32 {
    let next = pos.wrapping_add(1);
    if next >= capacity.wrapping_mul(2) {
        0
    } else {
        next
    }
}

/// Number of entries between `tail` and `head` (`0..=capacity`).
#[inline]
pub fn len(head: u32, tail: u32, capacity: u32) -> u32 {
    if head >= tail {
        head - tail
    } else {
        // head wrapped past 2 * capacity; both are < 2 * capacity <= 2^31.
        head.wrapping_add(capacity.wrapping_mul(2))
            .wrapping_sub(tail)
    }
}

/// Whether the producer may write one more entry.
#[inline]
pub fn has_room(head: u32, tail: u32, capacity: u32) -> bool {
    len(head, tail, capacity) < capacity
}

/// Slot index of position `pos`; a zero `capacity` (never passed) yields 0 rather than a panic.
#[inline]
pub fn slot(pos: u32, capacity: u32) -> usize {
    pos.checked_rem(capacity).unwrap_or(0) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_full_and_wrap() {
        let cap = 4;
        assert_eq!(len(0, 0, cap), 0);
        assert!(has_room(3, 0, cap));
        assert!(!has_room(4, 0, cap));
        assert_eq!(advance(7, cap), 0);
        // head wrapped, tail did not: 2 entries at positions 7 and 0.
        assert_eq!(len(1, 7, cap), 2);
        assert_eq!(len(3, 7, cap), 4);
        assert!(!has_room(3, 7, cap));
        assert_eq!(slot(7, cap), 3);
        assert_eq!(slot(3, cap), slot(7, cap));
    }

    #[test]
    fn simulated_spsc_keeps_order_for_odd_capacities() {
        for cap in [1u32, 2, 7, 8, 13] {
            let mut store = vec![0u32; cap as usize];
            let (mut head, mut tail) = (0u32, 0u32);
            let (mut next_in, mut next_out, mut dropped, mut got) = (0u32, 0u32, 0u32, 0u32);
            for round in 0..500u32 {
                for _ in 0..(round % 5) {
                    if has_room(head, tail, cap) {
                        store[slot(head, cap)] = next_in;
                        head = advance(head, cap);
                    } else {
                        dropped += 1;
                    }
                    next_in += 1;
                }
                for _ in 0..(round % 3) {
                    if len(head, tail, cap) == 0 {
                        break;
                    }
                    let v = store[slot(tail, cap)];
                    assert!(v >= next_out, "cap {cap}: out of order");
                    next_out = v + 1;
                    got += 1;
                    tail = advance(tail, cap);
                }
                assert!(len(head, tail, cap) <= cap);
            }
            assert_eq!(
                got + dropped + len(head, tail, cap),
                next_in,
                "cap {cap}: lost entries"
            );
        }
    }
}
