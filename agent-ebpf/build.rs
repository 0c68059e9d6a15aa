//! Rebuild when bpf-linker changes: cargo does not know this binary is a build input.
fn main() {
    if let Ok(linker) = which::which("bpf-linker") {
        println!("cargo:rerun-if-changed={}", linker.display());
    }
}
