// Empty library target so that `agent` can list this crate as a build dependency (cargo then
// rebuilds the agent when the probes change).
#![no_std]
