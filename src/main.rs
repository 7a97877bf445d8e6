//! The `cadre` binary. Its whole behaviour lives in `cadre-cli`; this shim
//! sits in the root package so the end-to-end tests can spawn it.

fn main() -> std::process::ExitCode {
    cadre_cli::main()
}
