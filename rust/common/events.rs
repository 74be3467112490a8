// SPDX-License-Identifier: GPL-2.0

//! Hardware event tables of the PMU models: one place for the module (validation at `buffer`
//! open) and the host tool (`oprof events`, report column names).
//!
//! Every model follows a legacy `cpu_type` of oprofile userspace (`events/arm/*`: 0.9.x for
//! ARMv7, 1.x for ARMv8) and the processor's Technical Reference Manual:
//!
//! | `cpu_type` | processor | perf PMU name | counters |
//! |---|---|---|---|
//! | `arm/armv7` | Cortex-A8 | `armv7_cortex_a8` | 5: 0 = CCNT, 1–4 = PMN0–3 |
//! | `arm/armv7-ca9` | Cortex-A9 | `armv7_cortex_a9` | 7: 0 = CCNT, 1–6 = PMN0–5 |
//! | `arm/armv7-ca15` | Cortex-A15 | `armv7_cortex_a15` | 7: 0 = CCNT, 1–6 = PMN0–5 |
//! | `arm/armv7-ca7` | Cortex-A7 | `armv7_cortex_a7` | 5: 0 = CCNT, 1–4 = PMN0–3 |
//! | `arm/armv8-ca53` | Cortex-A53 | `armv8_cortex_a53` | 7: 0 = PMCCNTR, 1–6 = PMEVCNTR0–5 |
//! | `arm/armv8-ca57` | Cortex-A57 | `armv8_cortex_a57` | 7: 0 = PMCCNTR, 1–6 = PMEVCNTR0–5 |
//! | `arm/armv8-pmuv3-common` | any ARMv8 PMUv3 | `armv8_pmuv3` | 7: 0 = PMCCNTR, 1–6 = PMEVCNTR0–5 |
//!
//! ARMv8 (PMUv3, oprofile 1.x `events/arm/armv8-*`; event numbers as Linux 7.3
//! `include/linux/perf/arm_pmuv3.h`): the cycle counter PMCCNTR_EL0 has no event number of its
//! own; perf's `arm_pmuv3` driver puts the architectural `CPU_CYCLES` event `0x11` on it when it
//! is free (`armv8pmu_can_use_pmccntr`) and on an event counter otherwise. So `CPU_CYCLES` is
//! `0x11` on ARMv8 and may go on every counter ([`Counters::Any`]); counter 0 still takes only
//! `CPU_CYCLES`. Cortex-A53 and A57 have 6 event counters (PMCR_EL0.N = 6, TRMs); PMUv3 allows up
//! to 31, the model offers 6 and the module lowers the count to what the hardware reports. The
//! minimums are oprofile 1.x's: 500, 5000 or 100000 per common event, 10007 for the cores' own.
//!
//! Perf PMU names (Linux 7.3 `drivers/perf/arm_pmuv3.c`): a devicetree PMU node is named by its
//! `compatible` through `armv8_pmu_of_device_ids`, without a suffix: `arm,cortex-a53-pmu` →
//! `armv8_cortex_a53` (the i.MX 8M Plus `imx8mp.dtsi`), `arm,cortex-a57-pmu` →
//! `armv8_cortex_a57`, `arm,armv8-pmuv3` → `armv8_pmuv3` (QEMU's `virt` board writes that
//! compatible for every `-cpu`, so a QEMU Cortex-A53 guest gets the generic model). ACPI systems
//! register every PMU as `armv8_pmuv3_N` (`arm_pmu_acpi.c`: `"%s_%d"`, N from 0);
//! [`CpuModel::by_pmu_name`] takes that suffix for the generic model only.
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
    /// Every counter: ARMv8 `CPU_CYCLES` (`0x11`), which perf puts on PMCCNTR_EL0 or an event
    /// counter.
    Any,
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
    /// Counter directories the model offers (the cycle counter included).
    pub num_counters: u32,
    /// The cycle counter's register name (`CCNT` on ARMv7, `PMCCNTR_EL0` on ARMv8).
    pub cycle_counter: &'static str,
    /// Event tables, searched in order: the ARMv7 common events, then the model's own.
    tables: &'static [&'static [Event]],
}

/// Legacy default event of `opcontrol` on ARMv7 (`CPU_CYCLES:100000`).
pub const DEFAULT_EVENT: (&str, u32) = ("CPU_CYCLES", 100_000);

/// Number of the ARMv7 cycle-counter event (CCNT; perf's ARMv7 driver's encoding).
pub const CPU_CYCLES: u32 = 0xFF;

/// Number of the ARMv8 PMUv3 architectural cycle event (`ARMV8_PMUV3_PERFCTR_CPU_CYCLES`).
pub const ARMV8_CPU_CYCLES: u32 = 0x11;

const fn ev(number: u32, name: &'static str, description: &'static str) -> Event {
    Event {
        number,
        name,
        counters: Counters::Pmn,
        minimum: 500,
        description,
    }
}

const fn ev_min(number: u32, name: &'static str, minimum: u32, description: &'static str) -> Event {
    Event {
        number,
        name,
        counters: Counters::Pmn,
        minimum,
        description,
    }
}

const fn ccnt(minimum: u32) -> Event {
    Event {
        number: CPU_CYCLES,
        name: "CPU_CYCLES",
        counters: Counters::Ccnt,
        minimum,
        description: "CPU cycle (cycle counter CCNT)",
    }
}

/// ARMv7 architectural events (ARM ARM v7-A, PMU event numbers 0x00–0x1D).
static ARMV7_COMMON: &[Event] = &[
    ev(
        0x00,
        "SW_INCR",
        "Software increment of a PMNx register (write to PMSWINC)",
    ),
    ev(0x01, "L1I_CACHE_REFILL", "Level 1 instruction cache refill"),
    ev(0x02, "L1I_TLB_REFILL", "Level 1 instruction TLB refill"),
    ev(0x03, "L1D_CACHE_REFILL", "Level 1 data cache refill"),
    ev(0x04, "L1D_CACHE", "Level 1 data cache access"),
    ev(0x05, "L1D_TLB_REFILL", "Level 1 data TLB refill"),
    ev(
        0x06,
        "LD_RETIRED",
        "Load instruction architecturally executed, condition code pass",
    ),
    ev(
        0x07,
        "ST_RETIRED",
        "Store instruction architecturally executed, condition code pass",
    ),
    ev(0x08, "INST_RETIRED", "Instruction architecturally executed"),
    ev(0x09, "EXC_TAKEN", "Exception taken"),
    ev(
        0x0A,
        "EXC_RETURN",
        "Exception return architecturally executed",
    ),
    ev(
        0x0B,
        "CID_WRITE_RETIRED",
        "Write to the CONTEXTIDR register architecturally executed",
    ),
    ev(
        0x0C,
        "PC_WRITE_RETIRED",
        "Software change of the PC architecturally executed, condition code pass",
    ),
    ev(
        0x0D,
        "BR_IMMED_RETIRED",
        "Immediate branch architecturally executed",
    ),
    ev(
        0x0E,
        "BR_RETURN_RETIRED",
        "Procedure return architecturally executed, condition code pass",
    ),
    ev(
        0x0F,
        "UNALIGNED_LDST_RETIRED",
        "Unaligned load or store architecturally executed, condition code pass",
    ),
    ev(
        0x10,
        "BR_MIS_PRED",
        "Branch mispredicted or not predicted, speculatively executed",
    ),
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
    ev(
        0x1C,
        "TTBR_WRITE_RETIRED",
        "Write to a TTBR architecturally executed, condition code pass",
    ),
    ev(0x1D, "BUS_CYCLES", "Bus cycle"),
];

/// ARMv7 PMUv2 (Cortex-A15, A7): the architectural cycle event on an event counter.
static PMUV2_CYCLES: &[Event] = &[ev(
    0x11,
    "CLOCK_CYCLES",
    "CPU cycle, counted by an event counter (PMNx)",
)];

/// Cortex-A8 TRM, section 3.2.51 (implementation-defined events).
static CORTEX_A8: &[Event] = &[
    ccnt(100_000),
    ev(0x40, "WRITE_BUFFER_FULL", "Cycles the write buffer is full"),
    ev(0x41, "L2_STORE_MERGED", "Store merged in the L2 cache"),
    ev(
        0x42,
        "L2_STORE_BUFF",
        "Bufferable store from the load/store unit to the L2 cache",
    ),
    ev(0x43, "L2_ACCESS", "L2 cache access"),
    ev(0x44, "L2_CACH_MISS", "Cacheable miss in the L2 cache"),
    ev(0x45, "AXI_READ_CYCLES", "Cycles with an active AXI read"),
    ev(0x46, "AXI_WRITE_CYCLES", "Cycles with an active AXI write"),
    ev(0x47, "MEMORY_REPLAY", "Replay event in the memory system"),
    ev(
        0x48,
        "UNALIGNED_ACCESS_REPLAY",
        "Unaligned access that causes a replay",
    ),
    ev(
        0x49,
        "L1_DATA_MISS",
        "L1 data cache miss caused by the hashing algorithm",
    ),
    ev(
        0x4A,
        "L1_INST_MISS",
        "L1 instruction cache miss caused by the hashing algorithm",
    ),
    ev(
        0x4B,
        "L1_DATA_COLORING",
        "L1 data access where a page colouring alias occurs",
    ),
    ev(
        0x4C,
        "L1_NEON_DATA",
        "NEON data access that hits the L1 cache",
    ),
    ev(
        0x4D,
        "L1_NEON_CACH_DATA",
        "NEON cacheable data access that hits the L1 cache",
    ),
    ev(
        0x4E,
        "L2_NEON",
        "L2 cache access caused by a NEON memory access",
    ),
    ev(0x4F, "L2_NEON_HIT", "NEON access that hits the L2 cache"),
    ev(
        0x50,
        "L1_INST",
        "L1 instruction cache access (CP15 cache operations excluded)",
    ),
    ev(
        0x51,
        "PC_RETURN_MIS_PRED",
        "Return stack misprediction at a pop (wrong target address)",
    ),
    ev(0x52, "PC_BRANCH_FAILED", "Branch prediction misprediction"),
    ev(0x53, "PC_BRANCH_TAKEN", "Predicted branch that is taken"),
    ev(0x54, "PC_BRANCH_EXECUTED", "Taken branch that is executed"),
    ev(
        0x55,
        "OP_EXECUTED",
        "Operation executed (an instruction or a step of a multi-cycle one)",
    ),
    ev(
        0x56,
        "CYCLES_INST_STALL",
        "Cycle with no instruction available to issue",
    ),
    ev(0x57, "CYCLES_INST", "Instructions issued in a cycle"),
    ev(
        0x58,
        "CYCLES_NEON_DATA_STALL",
        "Cycle the core waits for MRC data from NEON",
    ),
    ev(
        0x59,
        "CYCLES_NEON_INST_STALL",
        "Cycle the core waits on a full NEON instruction or load queue",
    ),
    ev(
        0x5A,
        "NEON_CYCLES",
        "Cycle where NEON and the integer core are both not idle",
    ),
    ev(0x70, "PMU0_EVENTS", "Event on external input PMUEXTIN[0]"),
    ev(0x71, "PMU1_EVENTS", "Event on external input PMUEXTIN[1]"),
    ev(
        0x72,
        "PMU_EVENTS",
        "Event on either external input PMUEXTIN[0] or PMUEXTIN[1]",
    ),
];

/// Cortex-A9 TRM, section 11.4.1 (implementation-defined events).
static CORTEX_A9: &[Event] = &[
    ccnt(500),
    ev(
        0x40,
        "JAVA_BC_EXEC",
        "Java bytecode decoded, including speculative ones",
    ),
    ev(
        0x41,
        "JAVA_SFTBC_EXEC",
        "Software Java bytecode decoded, including speculative ones",
    ),
    ev(0x42, "JAVA_BB_EXEC", "Jazelle taken branch executed"),
    ev(
        0x50,
        "CO_LF_MISS",
        "Coherent linefill request that misses in all other CPUs",
    ),
    ev(
        0x51,
        "CO_LF_HIT",
        "Coherent linefill request that hits in another CPU",
    ),
    ev(
        0x60,
        "IC_DEP_STALL",
        "Cycle stalled on the instruction side while the I-cache does a linefill",
    ),
    ev(
        0x61,
        "DC_DEP_STALL",
        "Cycle stalled with a pending D-side linefill and no pending TLB request",
    ),
    ev(
        0x62,
        "STALL_MAIN_TLB",
        "Cycle stalled on a translation table walk from the main TLB",
    ),
    ev(
        0x63,
        "STREX_PASS",
        "STREX architecturally executed and passed",
    ),
    ev(
        0x64,
        "STREX_FAILS",
        "STREX architecturally executed and failed",
    ),
    ev(
        0x65,
        "DATA_EVICT",
        "Data cache eviction caused by a linefill",
    ),
    ev(
        0x66,
        "ISS_NO_DISP",
        "Cycle where the issue stage dispatches nothing",
    ),
    ev(0x67, "ISS_EMPTY", "Cycle where the issue stage is empty"),
    ev(
        0x68,
        "INS_RENAME",
        "Instruction through the register renaming stage",
    ),
    ev(
        0x6E,
        "PRD_FN_RET",
        "Procedure return whose condition codes pass (exception returns excluded)",
    ),
    ev(
        0x70,
        "INS_MAIN_EXEC",
        "Instruction executed in the main (ALU/multiply) pipeline",
    ),
    ev(
        0x71,
        "INS_SND_EXEC",
        "Instruction executed in the second ALU pipeline",
    ),
    ev(
        0x72,
        "INS_LSU",
        "Instruction executed in the load/store unit",
    ),
    ev(
        0x73,
        "INS_FP_RR",
        "Floating-point instruction through the register rename stage",
    ),
    ev(
        0x74,
        "INS_NEON_RR",
        "NEON instruction through the register rename stage",
    ),
    ev(
        0x80,
        "STALL_PLD",
        "Cycle stalled because all PLD slots are full",
    ),
    ev(
        0x81,
        "STALL_WRITE",
        "Cycle stalled because the data side is full writing to external memory",
    ),
    ev(
        0x82,
        "STALL_INS_TLB",
        "Cycle stalled on a main TLB miss of the instruction side",
    ),
    ev(
        0x83,
        "STALL_DATA_TLB",
        "Cycle stalled on a main TLB miss of the data side",
    ),
    ev(
        0x84,
        "STALL_INS_UTLB",
        "Cycle stalled on a micro TLB miss of the instruction side",
    ),
    ev(
        0x85,
        "STALL_DATA_ULTB",
        "Cycle stalled on a micro TLB miss of the data side",
    ),
    ev(0x86, "STALL_DMB", "Cycle stalled on a DMB barrier"),
    ev(
        0x8A,
        "CLK_INT_EN",
        "Cycle with the integer core clock enabled",
    ),
    ev(
        0x8B,
        "CLK_DE_EN",
        "Cycle with the data engine clock enabled",
    ),
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
    ev(
        0x42,
        "L1D_CACHE_REFILL_LD",
        "Level 1 data cache refill, read",
    ),
    ev(
        0x43,
        "L1D_CACHE_REFILL_ST",
        "Level 1 data cache refill, write",
    ),
    ev(
        0x46,
        "L1D_CACHE_WB_VICTIM",
        "Level 1 data cache write-back, victim",
    ),
    ev(
        0x47,
        "L1D_CACHE_WB_CLEAN",
        "Level 1 data cache write-back, cleaning and coherency",
    ),
    ev(0x48, "L1D_CACHE_INVAL", "Level 1 data cache invalidate"),
    ev(0x4C, "L1D_TLB_REFILL_LD", "Level 1 data TLB refill, read"),
    ev(0x4D, "L1D_TLB_REFILL_ST", "Level 1 data TLB refill, write"),
    ev(0x50, "L2D_CACHE_LD", "Level 2 data cache access, read"),
    ev(0x51, "L2D_CACHE_ST", "Level 2 data cache access, write"),
    ev(
        0x52,
        "L2D_CACHE_REFILL_LD",
        "Level 2 data cache refill, read",
    ),
    ev(
        0x53,
        "L2D_CACHE_REFILL_ST",
        "Level 2 data cache refill, write",
    ),
    ev(
        0x56,
        "L2D_CACHE_WB_VICTIM",
        "Level 2 data cache write-back, victim",
    ),
    ev(
        0x57,
        "L2D_CACHE_WB_CLEAN",
        "Level 2 data cache write-back, cleaning and coherency",
    ),
    ev(0x58, "L2D_CACHE_INVAL", "Level 2 data cache invalidate"),
    ev(0x60, "BUS_ACCESS_LD", "Bus access, read"),
    ev(0x61, "BUS_ACCESS_ST", "Bus access, write"),
    ev(
        0x62,
        "BUS_ACCESS_SHARED",
        "Bus access, normal, cacheable, shareable",
    ),
    ev(
        0x63,
        "BUS_ACCESS_NOT_SHARED",
        "Bus access, not normal, cacheable, shareable",
    ),
    ev(0x64, "BUS_ACCESS_NORMAL", "Bus access, normal"),
    ev(0x65, "BUS_ACCESS_PERIPH", "Bus access, peripheral"),
    ev(0x66, "MEM_ACCESS_LD", "Data memory access, read"),
    ev(0x67, "MEM_ACCESS_ST", "Data memory access, write"),
    ev(0x68, "UNALIGNED_LD_SPEC", "Unaligned access, read"),
    ev(0x69, "UNALIGNED_ST_SPEC", "Unaligned access, write"),
    ev(0x6A, "UNALIGNED_LDST_SPEC", "Unaligned access"),
    ev(0x6C, "LDREX_SPEC", "LDREX speculatively executed"),
    ev(
        0x6D,
        "STREX_PASS_SPEC",
        "STREX speculatively executed, pass",
    ),
    ev(
        0x6E,
        "STREX_FAIL_SPEC",
        "STREX speculatively executed, fail",
    ),
    ev(0x70, "LD_SPEC", "Load speculatively executed"),
    ev(0x71, "ST_SPEC", "Store speculatively executed"),
    ev(0x72, "LDST_SPEC", "Load or store speculatively executed"),
    ev(
        0x73,
        "DP_SPEC",
        "Integer data processing speculatively executed",
    ),
    ev(
        0x74,
        "ASE_SPEC",
        "Advanced SIMD instruction speculatively executed",
    ),
    ev(
        0x75,
        "VFP_SPEC",
        "Floating-point instruction speculatively executed",
    ),
    ev(
        0x76,
        "PC_WRITE_SPEC",
        "Software change of the PC speculatively executed",
    ),
    ev(
        0x78,
        "BR_IMMED_SPEC",
        "Immediate branch speculatively executed",
    ),
    ev(
        0x79,
        "BR_RETURN_SPEC",
        "Procedure return speculatively executed",
    ),
    ev(
        0x7A,
        "BR_INDIRECT_SPEC",
        "Indirect branch speculatively executed",
    ),
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
    ev(
        0xC1,
        "EXT_MEM_REQ_NC",
        "Non-cacheable external memory request",
    ),
    ev(0xC2, "PREFETCH_LINEFILL", "Linefill caused by a prefetch"),
    ev(0xC3, "PREFETCH_LINEFILL_DROP", "Prefetch linefill dropped"),
    ev(0xC4, "READ_ALLOC_ENTER", "Entering read-allocate mode"),
    ev(0xC5, "READ_ALLOC", "Read-allocate mode"),
    ev(
        0xC9,
        "STALL_SB_FULL",
        "Data write stalls the pipeline because the store buffer is full",
    ),
    ev(
        0xCA,
        "LOCAL_CLUSTER_SNOOP",
        "Data read snooped from another processor of the local cluster",
    ),
];

/// ARMv8 PMUv3 architectural events as oprofile 1.x lists them (`events/arm/armv8-pmuv3-common`:
/// 0x00–0x1D, 0x1F, 0x20; not `CHAIN` 0x1E, which only links counter pairs), with its minimums.
static ARMV8_COMMON: &[Event] = &[
    Event {
        number: ARMV8_CPU_CYCLES,
        name: "CPU_CYCLES",
        counters: Counters::Any,
        minimum: 100_000,
        description: "CPU cycle (cycle counter PMCCNTR_EL0 or an event counter)",
    },
    ev_min(
        0x00,
        "SW_INCR",
        500,
        "Software increment (write to PMSWINC_EL0), condition code pass",
    ),
    ev_min(
        0x01,
        "L1I_CACHE_REFILL",
        5000,
        "Level 1 instruction cache refill",
    ),
    ev_min(
        0x02,
        "L1I_TLB_REFILL",
        5000,
        "Level 1 instruction TLB refill",
    ),
    ev_min(0x03, "L1D_CACHE_REFILL", 5000, "Level 1 data cache refill"),
    ev_min(0x04, "L1D_CACHE", 5000, "Level 1 data cache access"),
    ev_min(0x05, "L1D_TLB_REFILL", 5000, "Level 1 data TLB refill"),
    ev_min(
        0x06,
        "LD_RETIRED",
        100_000,
        "Load instruction architecturally executed, condition code pass",
    ),
    ev_min(
        0x07,
        "ST_RETIRED",
        100_000,
        "Store instruction architecturally executed, condition code pass",
    ),
    ev_min(
        0x08,
        "INST_RETIRED",
        100_000,
        "Instruction architecturally executed",
    ),
    ev_min(0x09, "EXC_TAKEN", 500, "Exception taken"),
    ev_min(
        0x0A,
        "EXC_RETURN",
        500,
        "Exception return architecturally executed, condition code pass",
    ),
    ev_min(
        0x0B,
        "CID_WRITE_RETIRED",
        500,
        "Write to CONTEXTIDR architecturally executed, condition code pass",
    ),
    ev_min(
        0x0C,
        "PC_WRITE_RETIRED",
        5000,
        "Software change of the PC architecturally executed, condition code pass",
    ),
    ev_min(
        0x0D,
        "BR_IMMED_RETIRED",
        5000,
        "Immediate branch architecturally executed",
    ),
    ev_min(
        0x0E,
        "BR_RETURN_RETIRED",
        5000,
        "Procedure return architecturally executed, condition code pass",
    ),
    ev_min(
        0x0F,
        "UNALIGNED_LDST_RETIRED",
        500,
        "Unaligned load or store architecturally executed, condition code pass",
    ),
    ev_min(
        0x10,
        "BR_MIS_PRED",
        5000,
        "Branch mispredicted or not predicted, speculatively executed",
    ),
    ev_min(
        0x12,
        "BR_PRED",
        5000,
        "Predictable branch speculatively executed",
    ),
    ev_min(0x13, "MEM_ACCESS", 100_000, "Data memory access"),
    ev_min(0x14, "L1I_CACHE", 5000, "Level 1 instruction cache access"),
    ev_min(0x15, "L1D_CACHE_WB", 5000, "Level 1 data cache write-back"),
    ev_min(0x16, "L2D_CACHE", 5000, "Level 2 data cache access"),
    ev_min(0x17, "L2D_CACHE_REFILL", 5000, "Level 2 data cache refill"),
    ev_min(0x18, "L2D_CACHE_WB", 5000, "Level 2 data cache write-back"),
    ev_min(0x19, "BUS_ACCESS", 5000, "Bus access"),
    ev_min(0x1A, "MEMORY_ERROR", 500, "Local memory error"),
    ev_min(
        0x1B,
        "INST_SPEC",
        100_000,
        "Operation speculatively executed",
    ),
    ev_min(
        0x1C,
        "TTBR_WRITE_RETIRED",
        5000,
        "Write to a TTBR architecturally executed, condition code pass",
    ),
    ev_min(0x1D, "BUS_CYCLES", 5000, "Bus cycle"),
    ev_min(
        0x1F,
        "L1D_CACHE_ALLOCATE",
        5000,
        "Level 1 data cache allocation without refill",
    ),
    ev_min(
        0x20,
        "L2D_CACHE_ALLOCATE",
        5000,
        "Level 2 data cache allocation without refill",
    ),
];

/// Cortex-A53 implementation-defined events (TRM section 12.9; oprofile 1.x
/// `events/arm/armv8-ca53`).
static CORTEX_A53: &[Event] = &[
    ev_min(0x60, "BUS_ACCESS_LD", 10007, "Bus access, read"),
    ev_min(0x61, "BUS_ACCESS_ST", 10007, "Bus access, write"),
    ev_min(
        0x7A,
        "BR_INDIRECT_SPEC",
        10007,
        "Indirect branch speculatively executed",
    ),
    ev_min(0x86, "EXC_IRQ", 10007, "IRQ exception taken"),
    ev_min(0x87, "EXC_FIQ", 10007, "FIQ exception taken"),
    ev_min(0xC0, "EXT_MEM_REQ", 10007, "External memory request"),
    ev_min(
        0xC1,
        "EXT_MEM_REQ_NC",
        10007,
        "Non-cacheable external memory request",
    ),
    ev_min(
        0xC2,
        "PREFETCH_LINEFILL",
        10007,
        "Linefill caused by a prefetch",
    ),
    ev_min(
        0xC3,
        "PREFETCH_LINEFILL_DROP",
        10007,
        "Instruction cache throttle",
    ),
    ev_min(
        0xC4,
        "READ_ALLOC_ENTER",
        10007,
        "Entering read-allocate mode",
    ),
    ev_min(0xC5, "READ_ALLOC", 10007, "Read-allocate mode"),
    ev_min(0xC6, "PRE_DECODE_ERR", 10007, "Pre-decode error"),
    ev_min(
        0xC7,
        "STALL_SB_FULL",
        10007,
        "Data write stalls the pipeline because the store buffer is full",
    ),
    ev_min(
        0xC8,
        "EXT_SNOOP",
        10007,
        "SCU snooped data from another CPU for this CPU",
    ),
    ev_min(0xC9, "BR_COND", 10007, "Conditional branch executed"),
    ev_min(
        0xCA,
        "BR_INDIRECT_MISPRED",
        10007,
        "Indirect branch mispredicted",
    ),
    ev_min(
        0xCB,
        "BR_INDIRECT_MISPRED_ADDR",
        10007,
        "Indirect branch mispredicted because of an address miscompare",
    ),
    ev_min(
        0xCC,
        "BR_COND_MISPRED",
        10007,
        "Conditional branch mispredicted",
    ),
    ev_min(
        0xD0,
        "L1I_CACHE_ERR",
        10007,
        "L1 instruction cache (data or tag) memory error",
    ),
    ev_min(
        0xD1,
        "L1D_CACHE_ERR",
        10007,
        "L1 data cache (data, tag or dirty) memory error",
    ),
    ev_min(0xD2, "TLB_ERR", 10007, "TLB memory error"),
    ev_min(
        0xE0,
        "OTHER_IQ_DEP_STALL",
        10007,
        "Cycle the DPU IQ is empty, not for a micro-TLB miss, I-cache miss or pre-decode error",
    ),
    ev_min(
        0xE1,
        "IC_DEP_STALL",
        10007,
        "Cycle the DPU IQ is empty while an instruction cache miss is processed",
    ),
    ev_min(
        0xE2,
        "IUTLB_DEP_STALL",
        10007,
        "Cycle the DPU IQ is empty while an instruction micro-TLB miss is processed",
    ),
    ev_min(
        0xE3,
        "DECODE_DEP_STALL",
        10007,
        "Cycle the DPU IQ is empty while a pre-decode error is processed",
    ),
    ev_min(
        0xE4,
        "OTHER_INTERLOCK_STALL",
        10007,
        "Cycle with an interlock other than for SIMD/FP or load/store",
    ),
    ev_min(
        0xE5,
        "AGU_DEP_STALL",
        10007,
        "Cycle with a load/store interlock waiting for address data in the AGU",
    ),
    ev_min(
        0xE6,
        "SIMD_DEP_STALL",
        10007,
        "Cycle with an interlock for an Advanced SIMD/floating-point operation",
    ),
    ev_min(
        0xE7,
        "LD_DEP_STALL",
        10007,
        "Cycle stalled in the Wr stage by a load miss",
    ),
    ev_min(
        0xE8,
        "ST_DEP_STALL",
        10007,
        "Cycle stalled in the Wr stage by a store",
    ),
];

/// Cortex-A57 implementation-defined events (TRM section 11.10; oprofile 1.x
/// `events/arm/armv8-ca57`).
static CORTEX_A57: &[Event] = &[
    ev_min(
        0x40,
        "L1D_CACHE_LD",
        10007,
        "Level 1 data cache access, read",
    ),
    ev_min(
        0x41,
        "L1D_CACHE_ST",
        10007,
        "Level 1 data cache access, write",
    ),
    ev_min(
        0x42,
        "L1D_CACHE_REFILL_LD",
        10007,
        "Level 1 data cache refill, read",
    ),
    ev_min(
        0x43,
        "L1D_CACHE_REFILL_ST",
        10007,
        "Level 1 data cache refill, write",
    ),
    ev_min(
        0x46,
        "L1D_CACHE_WB_VICTIM",
        10007,
        "Level 1 data cache write-back, victim",
    ),
    ev_min(
        0x47,
        "L1D_CACHE_WB_CLEAN",
        10007,
        "Level 1 data cache write-back, cleaning and coherency",
    ),
    ev_min(
        0x48,
        "L1D_CACHE_INVAL",
        10007,
        "Level 1 data cache invalidate",
    ),
    ev_min(
        0x4C,
        "L1D_TLB_REFILL_LD",
        10007,
        "Level 1 data TLB refill, read",
    ),
    ev_min(
        0x4D,
        "L1D_TLB_REFILL_ST",
        10007,
        "Level 1 data TLB refill, write",
    ),
    ev_min(
        0x50,
        "L2D_CACHE_LD",
        10007,
        "Level 2 data cache access, read",
    ),
    ev_min(
        0x51,
        "L2D_CACHE_ST",
        10007,
        "Level 2 data cache access, write",
    ),
    ev_min(
        0x52,
        "L2D_CACHE_REFILL_LD",
        10007,
        "Level 2 data cache refill, read",
    ),
    ev_min(
        0x53,
        "L2D_CACHE_REFILL_ST",
        10007,
        "Level 2 data cache refill, write",
    ),
    ev_min(
        0x56,
        "L2D_CACHE_WB_VICTIM",
        10007,
        "Level 2 data cache write-back, victim",
    ),
    ev_min(
        0x57,
        "L2D_CACHE_WB_CLEAN",
        10007,
        "Level 2 data cache write-back, cleaning and coherency",
    ),
    ev_min(
        0x58,
        "L2D_CACHE_INVAL",
        10007,
        "Level 2 data cache invalidate",
    ),
    ev_min(0x60, "BUS_ACCESS_LD", 10007, "Bus access, read"),
    ev_min(0x61, "BUS_ACCESS_ST", 10007, "Bus access, write"),
    ev_min(
        0x62,
        "BUS_ACCESS_SHARED",
        10007,
        "Bus access, normal, cacheable, shareable",
    ),
    ev_min(
        0x63,
        "BUS_ACCESS_NOT_SHARED",
        10007,
        "Bus access, not normal, cacheable, shareable",
    ),
    ev_min(0x64, "BUS_ACCESS_NORMAL", 10007, "Bus access, normal"),
    ev_min(0x65, "BUS_ACCESS_PERIPH", 10007, "Bus access, peripheral"),
    ev_min(0x66, "MEM_ACCESS_LD", 10007, "Data memory access, read"),
    ev_min(0x67, "MEM_ACCESS_ST", 10007, "Data memory access, write"),
    ev_min(0x68, "UNALIGNED_LD_SPEC", 10007, "Unaligned access, read"),
    ev_min(0x69, "UNALIGNED_ST_SPEC", 10007, "Unaligned access, write"),
    ev_min(0x6A, "UNALIGNED_LDST_SPEC", 10007, "Unaligned access"),
    ev_min(
        0x6C,
        "LDREX_SPEC",
        10007,
        "Exclusive load speculatively executed",
    ),
    ev_min(
        0x6D,
        "STREX_PASS_SPEC",
        10007,
        "Exclusive store speculatively executed, pass",
    ),
    ev_min(
        0x6E,
        "STREX_FAIL_SPEC",
        10007,
        "Exclusive store speculatively executed, fail",
    ),
    ev_min(0x70, "LD_SPEC", 10007, "Load speculatively executed"),
    ev_min(0x71, "ST_SPEC", 10007, "Store speculatively executed"),
    ev_min(
        0x72,
        "LDST_SPEC",
        10007,
        "Load or store speculatively executed",
    ),
    ev_min(
        0x73,
        "DP_SPEC",
        10007,
        "Integer data processing speculatively executed",
    ),
    ev_min(
        0x74,
        "ASE_SPEC",
        10007,
        "Advanced SIMD instruction speculatively executed",
    ),
    ev_min(
        0x75,
        "VFP_SPEC",
        10007,
        "Floating-point instruction speculatively executed",
    ),
    ev_min(
        0x76,
        "PC_WRITE_SPEC",
        10007,
        "Software change of the PC speculatively executed",
    ),
    ev_min(
        0x77,
        "CRYPTO_SPEC",
        10007,
        "Cryptographic instruction speculatively executed",
    ),
    ev_min(
        0x78,
        "BR_IMMED_SPEC",
        10007,
        "Immediate branch speculatively executed",
    ),
    ev_min(
        0x79,
        "BR_RETURN_SPEC",
        10007,
        "Procedure return speculatively executed",
    ),
    ev_min(
        0x7A,
        "BR_INDIRECT_SPEC",
        10007,
        "Indirect branch speculatively executed",
    ),
    ev_min(
        0x7C,
        "ISB_SPEC",
        10007,
        "ISB barrier speculatively executed",
    ),
    ev_min(
        0x7D,
        "DSB_SPEC",
        10007,
        "DSB barrier speculatively executed",
    ),
    ev_min(
        0x7E,
        "DMB_SPEC",
        10007,
        "DMB barrier speculatively executed",
    ),
    ev_min(
        0x81,
        "EXC_UNDEF",
        10007,
        "Exception taken, other synchronous",
    ),
    ev_min(0x82, "EXC_SVC", 10007, "Exception taken, supervisor call"),
    ev_min(
        0x83,
        "EXC_PABORT",
        10007,
        "Exception taken, instruction abort",
    ),
    ev_min(
        0x84,
        "EXC_DABORT",
        10007,
        "Exception taken, data abort or SError",
    ),
    ev_min(0x86, "EXC_IRQ", 10007, "Exception taken, IRQ"),
    ev_min(0x87, "EXC_FIQ", 10007, "Exception taken, FIQ"),
    ev_min(
        0x88,
        "EXC_SMC",
        10007,
        "Exception taken, secure monitor call",
    ),
    ev_min(0x8A, "EXC_HVC", 10007, "Exception taken, hypervisor call"),
    ev_min(
        0x8B,
        "EXC_TRAP_PABORT",
        10007,
        "Exception taken, instruction abort not taken locally",
    ),
    ev_min(
        0x8C,
        "EXC_TRAP_DABORT",
        10007,
        "Exception taken, data abort or SError not taken locally",
    ),
    ev_min(
        0x8D,
        "EXC_TRAP_OTHER",
        10007,
        "Exception taken, other trap not taken locally",
    ),
    ev_min(
        0x8E,
        "EXC_TRAP_IRQ",
        10007,
        "Exception taken, IRQ not taken locally",
    ),
    ev_min(
        0x8F,
        "EXC_TRAP_FIQ",
        10007,
        "Exception taken, FIQ not taken locally",
    ),
    ev_min(
        0x90,
        "RC_LD_SPEC",
        10007,
        "Load-acquire speculatively executed",
    ),
    ev_min(
        0x91,
        "RC_ST_SPEC",
        10007,
        "Store-release speculatively executed",
    ),
];

/// Every PMU model, in the order `oprof events --list` shows them.
pub static MODELS: &[CpuModel] = &[
    CpuModel {
        cpu_type: c"arm/armv7",
        pmu_name: "armv7_cortex_a8",
        label: "ARM Cortex-A8",
        num_counters: 5,
        cycle_counter: "CCNT",
        tables: &[CORTEX_A8, ARMV7_COMMON],
    },
    CpuModel {
        cpu_type: c"arm/armv7-ca9",
        pmu_name: "armv7_cortex_a9",
        label: "ARM Cortex-A9",
        num_counters: 7,
        cycle_counter: "CCNT",
        tables: &[CORTEX_A9, ARMV7_COMMON],
    },
    CpuModel {
        cpu_type: c"arm/armv7-ca15",
        pmu_name: "armv7_cortex_a15",
        label: "ARM Cortex-A15",
        num_counters: 7,
        cycle_counter: "CCNT",
        tables: &[CORTEX_A15, PMUV2_CYCLES, ARMV7_COMMON],
    },
    CpuModel {
        cpu_type: c"arm/armv7-ca7",
        pmu_name: "armv7_cortex_a7",
        label: "ARM Cortex-A7",
        num_counters: 5,
        cycle_counter: "CCNT",
        tables: &[CORTEX_A7, PMUV2_CYCLES, ARMV7_COMMON],
    },
    CpuModel {
        cpu_type: c"arm/armv8-ca53",
        pmu_name: "armv8_cortex_a53",
        label: "ARM Cortex-A53",
        num_counters: 7,
        cycle_counter: "PMCCNTR_EL0",
        tables: &[ARMV8_COMMON, CORTEX_A53],
    },
    CpuModel {
        cpu_type: c"arm/armv8-ca57",
        pmu_name: "armv8_cortex_a57",
        label: "ARM Cortex-A57",
        num_counters: 7,
        cycle_counter: "PMCCNTR_EL0",
        tables: &[ARMV8_COMMON, CORTEX_A57],
    },
    CpuModel {
        cpu_type: c"arm/armv8-pmuv3-common",
        pmu_name: GENERIC_PMUV3,
        label: "ARMv8 PMUv3",
        num_counters: 7,
        cycle_counter: "PMCCNTR_EL0",
        tables: &[ARMV8_COMMON],
    },
];

/// The perf PMU name of a devicetree `arm,armv8-pmuv3` node, and the base of every ACPI PMU's.
const GENERIC_PMUV3: &str = "armv8_pmuv3";

impl CpuModel {
    /// The model with this `cpu_type`.
    pub fn by_cpu_type(cpu_type: &str) -> Option<&'static CpuModel> {
        MODELS
            .iter()
            .find(|m| m.cpu_type.to_bytes() == cpu_type.as_bytes())
    }

    /// The `cpu_type` as text.
    pub fn name(&self) -> &'static str {
        core::str::from_utf8(self.cpu_type.to_bytes()).unwrap_or("?")
    }

    /// The model driving the perf PMU registered as `pmu_name`; ACPI's `armv8_pmuv3_N` (N
    /// decimal) is the generic PMUv3 model.
    pub fn by_pmu_name(pmu_name: &str) -> Option<&'static CpuModel> {
        let acpi = pmu_name
            .strip_prefix(GENERIC_PMUV3)
            .and_then(|rest| rest.strip_prefix('_'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
        let name = if acpi { GENERIC_PMUV3 } else { pmu_name };
        MODELS.iter().find(|m| m.pmu_name == name)
    }

    /// The event counter 0 (the cycle counter) takes: `CPU_CYCLES`.
    pub fn cycles(&self) -> Option<&'static Event> {
        self.events().find(|e| e.counters != Counters::Pmn)
    }

    /// Every event, the cycle event first, then by table order (ARMv7: model-specific, then
    /// common; ARMv8: common, then model-specific, as oprofile 1.x lists them).
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
        let all = if num_counters >= 32 {
            u32::MAX
        } else {
            (1u32 << num_counters) - 1
        };
        match e.counters {
            Counters::Ccnt => 1 & all,
            Counters::Pmn => all & !1,
            Counters::Any => all,
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
                    assert_ne!(
                        a.number,
                        b.number,
                        "{}: {} and {} share a number",
                        m.name(),
                        a.name,
                        b.name
                    );
                    assert_ne!(a.name, b.name, "{}: duplicate name", m.name());
                }
                assert!(
                    a.number <= 0xFF,
                    "{}: {} does not fit EVTSEL",
                    m.name(),
                    a.name
                );
                assert!(!a.description.is_empty() && a.minimum > 0);
            }
            let cycles = m.cycles().unwrap();
            assert_eq!(
                (cycles.name, m.counter_mask(cycles, m.num_counters) & 1),
                ("CPU_CYCLES", 1)
            );
            assert!(
                m.events()
                    .filter(|e| m.counter_mask(e, m.num_counters) & 1 != 0)
                    .count()
                    == 1,
                "{}: counter 0 takes only CPU_CYCLES",
                m.name()
            );
            assert_eq!(
                CpuModel::by_cpu_type(m.name()).unwrap().pmu_name,
                m.pmu_name
            );
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
        assert_eq!(
            a15.counter_mask(a15.event(0x11).unwrap(), 3),
            0b110,
            "fewer counters on the hardware"
        );
    }

    #[test]
    fn armv8_models_follow_oprofile_1x() {
        let a53 = CpuModel::by_pmu_name("armv8_cortex_a53").unwrap();
        assert_eq!(
            (a53.name(), a53.num_counters, a53.cycle_counter),
            ("arm/armv8-ca53", 7, "PMCCNTR_EL0")
        );
        let cycles = a53.event_by_name("CPU_CYCLES").unwrap();
        assert_eq!((cycles.number, cycles.minimum), (0x11, 100_000));
        assert_eq!(
            a53.counter_mask(cycles, 7),
            0b111_1111,
            "PMCCNTR or any event counter"
        );
        let refill = a53.event(0x03).unwrap();
        assert_eq!(
            (refill.name, refill.minimum, a53.counter_mask(refill, 7)),
            ("L1D_CACHE_REFILL", 5000, 0b111_1110)
        );
        assert_eq!(
            a53.event(0xC2).unwrap().name,
            "PREFETCH_LINEFILL",
            "ARMV8_A53_PERFCTR_PREF_LINEFILL"
        );
        assert_eq!(a53.event(0xE8).unwrap().minimum, 10007);
        assert!(a53.event(0x1E).is_none(), "CHAIN is not an event to sample");
        assert!(
            a53.event(0xFF).is_none(),
            "0xFF is ARMv7's CCNT encoding only"
        );
        assert_eq!(a53.events().count(), 32 + 30);
        let a57 = CpuModel::by_cpu_type("arm/armv8-ca57").unwrap();
        assert_eq!(
            (a57.pmu_name, a57.event(0x77).unwrap().name),
            ("armv8_cortex_a57", "CRYPTO_SPEC")
        );
        assert_eq!(a57.events().count(), 32 + 59);
        let generic = CpuModel::by_cpu_type("arm/armv8-pmuv3-common").unwrap();
        assert_eq!(
            (generic.pmu_name, generic.events().count()),
            ("armv8_pmuv3", 32)
        );
        assert_eq!(generic.event(0x20).unwrap().name, "L2D_CACHE_ALLOCATE");
    }

    #[test]
    fn acpi_pmu_names_are_the_generic_model() {
        assert_eq!(
            CpuModel::by_pmu_name("armv8_pmuv3_0").unwrap().name(),
            "arm/armv8-pmuv3-common"
        );
        assert_eq!(
            CpuModel::by_pmu_name("armv8_pmuv3_12").unwrap().name(),
            "arm/armv8-pmuv3-common"
        );
        for bad in [
            "armv8_pmuv3_",
            "armv8_pmuv3_x",
            "armv8_pmuv30",
            "armv8_cortex_a53_0",
            "armv7_cortex_a9_1",
        ] {
            assert!(CpuModel::by_pmu_name(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn counter_list_format() {
        let mut s = std::string::String::new();
        write_counter_list(&mut s, 0b11110).unwrap();
        assert_eq!(s, "1, 2, 3, 4");
    }
}
