//! Compiles `proto/semroute/v1/*.proto` with protox (pure Rust, no protoc)
//! and generates prost messages, plus tonic stubs when the `grpc` feature is on.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/semroute/v1/classifier.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    let grpc = std::env::var_os("CARGO_FEATURE_GRPC").is_some();
    tonic_prost_build::configure()
        .build_server(grpc)
        .build_client(grpc)
        .build_transport(grpc)
        .compile_fds(fds)?;
    Ok(())
}
