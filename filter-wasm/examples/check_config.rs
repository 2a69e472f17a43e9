//! Parses a filter configuration (the JSON Envoy hands the filter: `pluginConfig` of an
//! Istio WasmPlugin, or the `configuration` value in envoy.yaml) with the filter's own
//! code, natively, and says whether the filter would start with it.
//!
//! `cargo run --release -p semroute-filter --example check_config -- FILE` (or `-` for
//! stdin): prints `valid` and exits 0, or prints the error and exits 1.

use std::io::Read;

use semroute_filter::config::FilterConfig;

fn main() -> std::process::ExitCode {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: check_config FILE|-");
        return std::process::ExitCode::from(2);
    };
    let mut bytes = Vec::new();
    let read = if path == "-" {
        std::io::stdin().read_to_end(&mut bytes).map(|_| ())
    } else {
        std::fs::read(&path).map(|b| bytes = b)
    };
    if let Err(e) = read {
        eprintln!("{path}: {e}");
        return std::process::ExitCode::from(2);
    }
    match FilterConfig::from_json(&bytes) {
        Ok(_) => {
            println!("{path}: valid");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            println!("{path}: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
