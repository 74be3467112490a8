// SPDX-License-Identifier: GPL-2.0

//! Hardware event tables of the PMU models: one place for the module (validation at `buffer`
//! open) and the host tool (`oprof events`, report column names).
//!
//! Every model follows a legacy `cpu_type` of oprofile 0.9.x userspace (`events/arm/*`) and the
//! processor's Technical Reference Manual:
//!
//! | `cpu_type` | processor | perf PMU name | counters |
//! |---|---|---|---|
//! | `arm/armv7` | Cortex-A8 | `armv7_cortex_a8` | 5: 0 = CCNT, 1–4 = PMN0–3 |
//! | `arm/armv7-ca9` | Cortex-A9 | `armv7_cortex_a9` | 7: 0 = CCNT, 1–6 = PMN0–5 |
//! | `arm/armv7-ca15` | Cortex-A15 | `armv7_cortex_a15` | 7: 0 = CCNT, 1–6 = PMN0–5 |
//! | `arm/armv7-ca7` | Cortex-A7 | `armv7_cortex_a7` | 5: 0 = CCNT, 1–4 = PMN0–3 |
//!
//! Counter 0 is the cycle counter CCNT and takes only `CPU_CYCLES` (event `0xFF`, the perf
//! ARMv7 driver's encoding for CCNT); the other counters take every other event. Unit masks do
//! not exist on ARMv7 (legacy `um:zero`): the only valid `unit_mask` is 0. Minimum counts are the
//! legacy ones: 500 for every event, except `CPU_CYCLES` on `arm/armv7`, whose minimum is 100000
//! (oprofile 0.9.7–0.9.9).
//!
//! Deviations from the legacy files, both towards the TRMs: the Cortex-A15 `L2D_CACHE_ST` is
//! `0x51` (0.9.9 listed it as a second `0x52`), and the PMUv2 models (A15, A7) list the
//! architectural cycle event `0x11` as `CLOCK_CYCLES`, which legacy omitted, so cycles can be
//! sampled on an event counter next to CCNT.

/// Which counters of a model may count an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counters {
    /// Counter 0 only: the cycle counter CCNT.
    Ccnt,
    /// Any event counter PMNx: counters 1..num_counters.
    Pmn,
}

/// One event of a model's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Event {
    /// Event number written to `N/event` (decimal or `0x` hex) and passed to perf as a raw event.
    pub number: u32,
    /// Legacy userspace name (`ophelp`).
    pub name: &'static str,
    /// Counters that may count it.
    pub counters: Counters,
    /// Smallest accepted sampling `count`, in events.
    pub minimum: u32,
    /// One-line description.
    pub description: &'static str,
}

/// A PMU model: its `cpu_type`, the perf PMU it drives and its events.
#[derive(Debug)]
pub struct CpuModel {
    /// The `cpu_type` string (legacy userspace name), NUL-terminated for the kernel file.
    pub cpu_type: &'static core::ffi::CStr,
    /// The name the kernel's perf PMU driver registers (`/sys/bus/event_source/devices/*`).
    pub pmu_name: &'static str,
    /// Processor name for humans.
    pub label: &'static str,
    /// Counter directories the model offers (CCNT included).
    pub num_counters: u32,
    /// Event tables, searched in order: the ARMv7 common events, then the model's own.
    tables: &'static [&'static [Event]],
}

/// Legacy default event of `opcontrol` on ARMv7 (`CPU_CYCLES:100000`).
pub const DEFAULT_EVENT: (&str, u32) = ("CPU_CYCLES", 100_000);

/// Number of the cycle-counter event (CCNT).
pub const CPU_CYCLES: u32 = 0xFF;

const fn ev(number: u32, name: &'static str, description: &'static str) -> Event {
    Event { number, name, counters: Counters::Pmn, minimum: 500, description }
}

const fn ccnt(minimum: u32) -> Event {
    Event { number: CPU_CYCLES, name: "CPU_CYCLES", counters: Counters::Ccnt, minimum, description: "CPU cycle (cycle counter CCNT)" }
}

/// ARMv7 architectural events (ARM ARM v7-A, PMU event numbers 0x00–0x1D).
static ARMV7_COMMON: &[Event] = &[
    ev(0x00, "SW_INCR", "Software increment of a PMNx register (write to PMSWINC)"),
    ev(0x01, "L1I_CACHE_REFILL", "Level 1 instruction cache refill"),
    ev(0x02, "L1I_TLB_REFILL", "Level 1 instruction TLB refill"),
    ev(0x03, "L1D_CACHE_REFILL", "Level 1 data cache refill"),
    ev(0x04, "L1D_CACHE", "Level 1 data cache access"),
    ev(0x05, "L1D_TLB_REFILL", "Level 1 data TLB refill"),
    ev(0x06, "LD_RETIRED", "Load instruction architecturally executed, condition code pass"),
    ev(0x07, "ST_RETIRED", "Store instruction architecturally executed, condition code pass"),
    ev(0x08, "INST_RETIRED", "Instruction architecturally executed"),
    ev(0x09, "EXC_TAKEN", "Exception taken"),
    ev(0x0A, "EXC_RETURN", "Exception return architecturally executed"),
    ev(0x0B, "CID_WRITE_RETIRED", "Write to the CONTEXTIDR register architecturally executed"),
    ev(0x0C, "PC_WRITE_RETIRED", "Software change of the PC architecturally executed, condition code pass"),
    ev(0x0D, "BR_IMMED_RETIRED", "Immediate branch architecturally executed"),
    ev(0x0E, "BR_RETURN_RETIRED", "Procedure return architecturally executed, condition code pass"),
    ev(0x0F, "UNALIGNED_LDST_RETIRED", "Unaligned load or store architecturally executed, condition code pass"),
    ev(0x10, "BR_MIS_PRED", "Branch mispredicted or not predicted, speculatively executed"),
    ev(0x12, "BR_PRED", "Predictable branch speculatively executed"),
    ev(0x13, "MEM_ACCESS", "Data memory access"),
    ev(0x14, "L1I_CACHE", "Level 1 instruction cache access"),
    ev(0x15, "L1D_CACHE_WB", "Level 1 data cache write-back"),
    ev(0x16, "L2D_CACHE", "Level 2 data cache access"),
    ev(0x17, "L2D_CACHE_REFILL", "Level 2 data cache refill"),
    ev(0x18, "L2D_CACHE_WB", "Level 2 data cache write-back"),
    ev(0x19, "BUS_ACCESS", "Bus access"),
    ev(0x1A, "MEMORY_ERROR", "Local memory error"),
    ev(0x1B, "INST_SPEC", "Instruction speculatively executed"),
    ev(0x1C, "TTBR_WRITE_RETIRED", "Write to a TTBR architecturally executed, condition code pass"),
    ev(0x1D, "BUS_CYCLES", "Bus cycle"),
];

/// ARMv7 PMUv2 (Cortex-A15, A7): the architectural cycle event on an event counter.
static PMUV2_CYCLES: &[Event] = &[ev(0x11, "CLOCK_CYCLES", "CPU cycle, counted by an event counter (PMNx)")];

/// Cortex-A8 TRM, section 3.2.51 (implementation-defined events).
static CORTEX_A8: &[Event] = &[
    ccnt(100_000),
    ev(0x40, "WRITE_BUFFER_FULL", "Cycles the write buffer is full"),
    ev(0x41, "L2_STORE_MERGED", "Store merged in the L2 cache"),
    ev(0x42, "L2_STORE_BUFF", "Bufferable store from the load/store unit to the L2 cache"),
    ev(0x43, "L2_ACCESS", "L2 cache access"),
    ev(0x44, "L2_CACH_MISS", "Cacheable miss in the L2 cache"),
    ev(0x45, "AXI_READ_CYCLES", "Cycles with an active AXI read"),
    ev(0x46, "AXI_WRITE_CYCLES", "Cycles with an active AXI write"),
    ev(0x47, "MEMORY_REPLAY", "Replay event in the memory system"),
    ev(0x48, "UNALIGNED_ACCESS_REPLAY", "Unaligned access that causes a replay"),
    ev(0x49, "L1_DATA_MISS", "L1 data cache miss caused by the hashing algorithm"),
    ev(0x4A, "L1_INST_MISS", "L1 instruction cache miss caused by the hashing algorithm"),
    ev(0x4B, "L1_DATA_COLORING", "L1 data access where a page colouring alias occurs"),
    ev(0x4C, "L1_NEON_DATA", "NEON data access that hits the L1 cache"),
    ev(0x4D, "L1_NEON_CACH_DATA", "NEON cacheable data access that hits the L1 cache"),
    ev(0x4E, "L2_NEON", "L2 cache access caused by a NEON memory access"),
    ev(0x4F, "L2_NEON_HIT", "NEON access that hits the L2 cache"),
    ev(0x50, "L1_INST", "L1 instruction cache access (CP15 cache operations excluded)"),
    ev(0x51, "PC_RETURN_MIS_PRED", "Return stack misprediction at a pop (wrong target address)"),
    ev(0x52, "PC_BRANCH_FAILED", "Branch prediction misprediction"),
    ev(0x53, "PC_BRANCH_TAKEN", "Predicted branch that is taken"),
    ev(0x54, "PC_BRANCH_EXECUTED", "Taken branch that is executed"),
    ev(0x55, "OP_EXECUTED", "Operation executed (an instruction or a step of a multi-cycle one)"),
    ev(0x56, "CYCLES_INST_STALL", "Cycle with no instruction available to issue"),
    ev(0x57, "CYCLES_INST", "Instructions issued in a cycle"),
    ev(0x58, "CYCLES_NEON_DATA_STALL", "Cycle the core waits for MRC data from NEON"),
    ev(0x59, "CYCLES_NEON_INST_STALL", "Cycle the core waits on a full NEON instruction or load queue"),
    ev(0x5A, "NEON_CYCLES", "Cycle where NEON and the integer core are both not idle"),
    ev(0x70, "PMU0_EVENTS", "Event on external input PMUEXTIN[0]"),
    ev(0x71, "PMU1_EVENTS", "Event on external input PMUEXTIN[1]"),
    ev(0x72, "PMU_EVENTS", "Event on either external input PMUEXTIN[0] or PMUEXTIN[1]"),
];

/// Cortex-A9 TRM, section 11.4.1 (implementation-defined events).
static CORTEX_A9: &[Event] = &[
    ccnt(500),
    ev(0x40, "JAVA_BC_EXEC", "Java bytecode decoded, including speculative ones"),
    ev(0x41, "JAVA_SFTBC_EXEC", "Software Java bytecode decoded, including speculative ones"),
    ev(0x42, "JAVA_BB_EXEC", "Jazelle taken branch executed"),
    ev(0x50, "CO_LF_MISS", "Coherent linefill request that misses in all other CPUs"),
    ev(0x51, "CO_LF_HIT", "Coherent linefill request that hits in another CPU"),
    ev(0x60, "IC_DEP_STALL", "Cycle stalled on the instruction side while the I-cache does a linefill"),
    ev(0x61, "DC_DEP_STALL", "Cycle stalled with a pending D-side linefill and no pending TLB request"),
    ev(0x62, "STALL_MAIN_TLB", "Cycle stalled on a translation table walk from the main TLB"),
    ev(0x63, "STREX_PASS", "STREX architecturally executed and passed"),
    ev(0x64, "STREX_FAILS", "STREX architecturally executed and failed"),
    ev(0x65, "DATA_EVICT", "Data cache eviction caused by a linefill"),
    ev(0x66, "ISS_NO_DISP", "Cycle where the issue stage dispatches nothing"),
    ev(0x67, "ISS_EMPTY", "Cycle where the issue stage is empty"),
    ev(0x68, "INS_RENAME", "Instruction through the register renaming stage"),
    ev(0x6E, "PRD_FN_RET", "Procedure return whose condition codes pass (exception returns excluded)"),
    ev(0x70, "INS_MAIN_EXEC", "Instruction executed in the main (ALU/multiply) pipeline"),
    ev(0x71, "INS_SND_EXEC", "Instruction executed in the second ALU pipeline"),
    ev(0x72, "INS_LSU", "Instruction executed in the load/store unit"),
    ev(0x73, "INS_FP_RR", "Floating-point instruction through the register rename stage"),
    ev(0x74, "INS_NEON_RR", "NEON instruction through the register rename stage"),
    ev(0x80, "STALL_PLD", "Cycle stalled because all PLD slots are full"),
    ev(0x81, "STALL_WRITE", "Cycle stalled because the data side is full writing to external memory"),
    ev(0x82, "STALL_INS_TLB", "Cycle stalled on a main TLB miss of the instruction side"),
    ev(0x83, "STALL_DATA_TLB", "Cycle stalled on a main TLB miss of the data side"),
    ev(0x84, "STALL_INS_UTLB", "Cycle stalled on a micro TLB miss of the instruction side"),
    ev(0x85, "STALL_DATA_ULTB", "Cycle stalled on a micro TLB miss of the data side"),
    ev(0x86, "STALL_DMB", "Cycle stalled on a DMB barrier"),
    ev(0x8A, "CLK_INT_EN", "Cycle with the integer core clock enabled"),
    ev(0x8B, "CLK_DE_EN", "Cycle with the data engine clock enabled"),
    ev(0x90, "INS_ISB", "ISB architecturally executed"),
    ev(0x91, "INS_DSB", "DSB architecturally executed"),
    ev(0x92, "INS_DMB", "DMB speculatively executed"),
    ev(0x93, "EXT_IRQ", "External interrupt taken"),
    ev(0xA0, "PLE_CL_REQ_CMP", "PLE cache line request completed"),
    ev(0xA1, "PLE_CL_REQ_SKP", "PLE cache line request skipped"),
    ev(0xA2, "PLE_FIFO_FLSH", "PLE FIFO flush"),
    ev(0xA3, "PLE_REQ_COMP", "PLE request completed"),
    ev(0xA4, "PLE_FIFO_OF", "PLE FIFO overflow"),
    ev(0xA5, "PLE_REQ_PRG", "PLE request programmed"),
];

/// Cortex-A15 TRM, section 11.8 (implementation-defined events).
static CORTEX_A15: &[Event] = &[
    ccnt(500),
    ev(0x40, "L1D_CACHE_LD", "Level 1 data cache access, read"),
    ev(0x41, "L1D_CACHE_ST", "Level 1 data cache access, write"),
    ev(0x42, "L1D_CACHE_REFILL_LD", "Level 1 data cache refill, read"),
    ev(0x43, "L1D_CACHE_REFILL_ST", "Level 1 data cache refill, write"),
    ev(0x46, "L1D_CACHE_WB_VICTIM", "Level 1 data cache write-back, victim"),
    ev(0x47, "L1D_CACHE_WB_CLEAN", "Level 1 data cache write-back, cleaning and coherency"),
    ev(0x48, "L1D_CACHE_INVAL", "Level 1 data cache invalidate"),
    ev(0x4C, "L1D_TLB_REFILL_LD", "Level 1 data TLB refill, read"),
    ev(0x4D, "L1D_TLB_REFILL_ST", "Level 1 data TLB refill, write"),
    ev(0x50, "L2D_CACHE_LD", "Level 2 data cache access, read"),
    ev(0x51, "L2D_CACHE_ST", "Level 2 data cache access, write"),
    ev(0x52, "L2D_CACHE_REFILL_LD", "Level 2 data cache refill, read"),
    ev(0x53, "L2D_CACHE_REFILL_ST", "Level 2 data cache refill, write"),
    ev(0x56, "L2D_CACHE_WB_VICTIM", "Level 2 data cache write-back, victim"),
    ev(0x57, "L2D_CACHE_WB_CLEAN", "Level 2 data cache write-back, cleaning and coherency"),
    ev(0x58, "L2D_CACHE_INVAL", "Level 2 data cache invalidate"),
    ev(0x60, "BUS_ACCESS_LD", "Bus access, read"),
    ev(0x61, "BUS_ACCESS_ST", "Bus access, write"),
    ev(0x62, "BUS_ACCESS_SHARED", "Bus access, normal, cacheable, shareable"),
    ev(0x63, "BUS_ACCESS_NOT_SHARED", "Bus access, not normal, cacheable, shareable"),
    ev(0x64, "BUS_ACCESS_NORMAL", "Bus access, normal"),
    ev(0x65, "BUS_ACCESS_PERIPH", "Bus access, peripheral"),
    ev(0x66, "MEM_ACCESS_LD", "Data memory access, read"),
    ev(0x67, "MEM_ACCESS_ST", "Data memory access, write"),
    ev(0x68, "UNALIGNED_LD_SPEC", "Unaligned access, read"),
    ev(0x69, "UNALIGNED_ST_SPEC", "Unaligned access, write"),
    ev(0x6A, "UNALIGNED_LDST_SPEC", "Unaligned access"),
    ev(0x6C, "LDREX_SPEC", "LDREX speculatively executed"),
    ev(0x6D, "STREX_PASS_SPEC", "STREX speculatively executed, pass"),
    ev(0x6E, "STREX_FAIL_SPEC", "STREX speculatively executed, fail"),
    ev(0x70, "LD_SPEC", "Load speculatively executed"),
    ev(0x71, "ST_SPEC", "Store speculatively executed"),
    ev(0x72, "LDST_SPEC", "Load or store speculatively executed"),
    ev(0x73, "DP_SPEC", "Integer data processing speculatively executed"),
    ev(0x74, "ASE_SPEC", "Advanced SIMD instruction speculatively executed"),
    ev(0x75, "VFP_SPEC", "Floating-point instruction speculatively executed"),
    ev(0x76, "PC_WRITE_SPEC", "Software change of the PC speculatively executed"),
    ev(0x78, "BR_IMMED_SPEC", "Immediate branch speculatively executed"),
    ev(0x79, "BR_RETURN_SPEC", "Procedure return speculatively executed"),
    ev(0x7A, "BR_INDIRECT_SPEC", "Indirect branch speculatively executed"),
    ev(0x7C, "ISB_SPEC", "ISB barrier speculatively executed"),
    ev(0x7D, "DSB_SPEC", "DSB barrier speculatively executed"),
    ev(0x7E, "DMB_SPEC", "DMB barrier speculatively executed"),
];

/// Cortex-A7 TRM, section 11.8 (implementation-defined events; legacy shares the A5's).
static CORTEX_A7: &[Event] = &[
    ccnt(500),
    ev(0x60, "BUS_ACCESS_LD", "Bus access, read"),
    ev(0x61, "BUS_ACCESS_ST", "Bus access, write"),
    ev(0x86, "EXC_IRQ", "IRQ exception taken"),
    ev(0x87, "EXC_FIQ", "FIQ exception taken"),
    ev(0xC0, "EXT_MEM_REQ", "External memory request"),
    ev(0xC1, "EXT_MEM_REQ_NC", "Non-cacheable external memory request"),
    ev(0xC2, "PREFETCH_LINEFILL", "Linefill caused by a prefetch"),
    ev(0xC3, "PREFETCH_LINEFILL_DROP", "Prefetch linefill dropped"),
    ev(0xC4, "READ_ALLOC_ENTER", "Entering read-allocate mode"),
    ev(0xC5, "READ_ALLOC", "Read-allocate mode"),
    ev(0xC9, "STALL_SB_FULL", "Data write stalls the pipeline because the store buffer is full"),
    ev(0xCA, "LOCAL_CLUSTER_SNOOP", "Data read snooped from another processor of the local cluster"),
];

/// Every PMU model, in the order `oprof events --list` shows them.
pub static MODELS: &[CpuModel] = &[
    CpuModel { cpu_type: c"arm/armv7", pmu_name: "armv7_cortex_a8", label: "ARM Cortex-A8", num_counters: 5, tables: &[CORTEX_A8, ARMV7_COMMON] },
    CpuModel { cpu_type: c"arm/armv7-ca9", pmu_name: "armv7_cortex_a9", label: "ARM Cortex-A9", num_counters: 7, tables: &[CORTEX_A9, ARMV7_COMMON] },
    CpuModel { cpu_type: c"arm/armv7-ca15", pmu_name: "armv7_cortex_a15", label: "ARM Cortex-A15", num_counters: 7, tables: &[CORTEX_A15, PMUV2_CYCLES, ARMV7_COMMON] },
    CpuModel { cpu_type: c"arm/armv7-ca7", pmu_name: "armv7_cortex_a7", label: "ARM Cortex-A7", num_counters: 5, tables: &[CORTEX_A7, PMUV2_CYCLES, ARMV7_COMMON] },
];

impl CpuModel {
    /// The model with this `cpu_type`.
    pub fn by_cpu_type(cpu_type: &str) -> Option<&'static CpuModel> {
        MODELS.iter().find(|m| m.cpu_type.to_bytes() == cpu_type.as_bytes())
    }

    /// The `cpu_type` as text.
    pub fn name(&self) -> &'static str {
        core::str::from_utf8(self.cpu_type.to_bytes()).unwrap_or("?")
    }

    /// The model driving the perf PMU registered as `pmu_name`.
    pub fn by_pmu_name(pmu_name: &str) -> Option<&'static CpuModel> {
        MODELS.iter().find(|m| m.pmu_name == pmu_name)
    }

    /// Every event, CCNT first, then by table order (model-specific, then common).
    pub fn events(&self) -> impl Iterator<Item = &'static Event> {
        self.tables.iter().flat_map(|t| t.iter())
    }

    /// The event numbered `number`.
    pub fn event(&self, number: u64) -> Option<&'static Event> {
        self.events().find(|e| u64::from(e.number) == number)
    }

    /// The event named `name` (exact, case-sensitive as legacy).
    pub fn event_by_name(&self, name: &str) -> Option<&'static Event> {
        self.events().find(|e| e.name == name)
    }

    /// Bit mask of the counters (among `num_counters`) that may count `e`.
    pub fn counter_mask(&self, e: &Event, num_counters: u32) -> u32 {
        let all = if num_counters >= 32 { u32::MAX } else { (1u32 << num_counters) - 1 };
        match e.counters {
            Counters::Ccnt => 1 & all,
            Counters::Pmn => all & !1,
        }
    }
}

/// Writes the counters of `mask` as `0, 1, 2` (ophelp style) into `f`.
pub fn write_counter_list(f: &mut dyn core::fmt::Write, mask: u32) -> core::fmt::Result {
    let mut first = true;
    for c in 0..32 {
        if mask & (1 << c) != 0 {
            if !first {
                f.write_str(", ")?;
            }
            write!(f, "{c}")?;
            first = false;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_are_consistent() {
        for m in MODELS {
            let events: std::vec::Vec<_> = m.events().collect();
            for (i, a) in events.iter().enumerate() {
                for b in &events[i + 1..] {
                    assert_ne!(a.number, b.number, "{}: {} and {} share a number", m.name(), a.name, b.name);
                    assert_ne!(a.name, b.name, "{}: duplicate name", m.name());
                }
                assert!(a.number <= 0xFF, "{}: {} does not fit EVTSEL", m.name(), a.name);
                assert!(!a.description.is_empty() && a.minimum > 0);
            }
            assert_eq!(m.event(u64::from(CPU_CYCLES)).unwrap().counters, Counters::Ccnt);
            assert_eq!(CpuModel::by_cpu_type(m.name()).unwrap().pmu_name, m.pmu_name);
            assert_eq!(CpuModel::by_pmu_name(m.pmu_name).unwrap().name(), m.name());
        }
    }

    #[test]
    fn cortex_a8_follows_the_reference() {
        let a8 = CpuModel::by_pmu_name("armv7_cortex_a8").unwrap();
        assert_eq!((a8.name(), a8.num_counters), ("arm/armv7", 5));
        let cycles = a8.event_by_name("CPU_CYCLES").unwrap();
        assert_eq!((cycles.number, cycles.minimum), (0xFF, 100_000));
        assert_eq!(a8.counter_mask(cycles, 5), 0b00001);
        let refill = a8.event(3).unwrap();
        assert_eq!((refill.name, refill.minimum), ("L1D_CACHE_REFILL", 500));
        assert_eq!(a8.counter_mask(refill, 5), 0b11110);
        assert!(a8.event(0x11).is_none(), "the A8 has no PMNx cycle event");
        assert_eq!(a8.event(0x72).unwrap().name, "PMU_EVENTS");
        assert_eq!(a8.events().count(), 1 + 30 + 29);
    }

    #[test]
    fn pmuv2_models_have_clock_cycles() {
        for t in ["arm/armv7-ca15", "arm/armv7-ca7"] {
            let m = CpuModel::by_cpu_type(t).unwrap();
            assert_eq!(m.event_by_name("CLOCK_CYCLES").unwrap().number, 0x11);
            assert_eq!(m.event(0xFF).unwrap().minimum, 500);
        }
        let a15 = CpuModel::by_cpu_type("arm/armv7-ca15").unwrap();
        assert_eq!(a15.event(0x51).unwrap().name, "L2D_CACHE_ST");
        assert_eq!(a15.counter_mask(a15.event(0x11).unwrap(), 7), 0b111_1110);
        assert_eq!(a15.counter_mask(a15.event(0x11).unwrap(), 3), 0b110, "fewer counters on the hardware");
    }

    #[test]
    fn counter_list_format() {
        let mut s = std::string::String::new();
        write_counter_list(&mut s, 0b11110).unwrap();
        assert_eq!(s, "1, 2, 3, 4");
    }
}
