//! Libraries loaded at run time, never linked: a fresh node has none of them, and gdrdoctor
//! must still start there and say so. This is the only module with `unsafe` code.

pub mod verbs;
