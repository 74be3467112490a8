//! Real-stack tests (qemu-arm).
