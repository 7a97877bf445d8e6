//! The `cadre` binary. Its whole behaviour lives in `cadre-cli`; this shim
//! sits in the root package so the end-to-end tests can spawn it.

fn main() -> std::process::ExitCode {
    // First, before any thread starts: run as the in-sandbox helper when
    // started as one (it never returns then), or register this binary as
    // the helper of the commands this process runs.
    cadre_runtime::sandbox::dispatch_helper();
    cadre_cli::main()
}
