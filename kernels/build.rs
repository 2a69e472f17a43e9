//! Compiles `proto/onnx_wire.proto` (the ONNX model format) with protox, pure
//! Rust, no protoc, into prost messages for the graph rewrite.
//!
//! The CUDA kernel in `cuda/` is not built here: it needs `nvcc` and is built
//! by `cuda/build.sh`, which skips cleanly where no CUDA toolkit exists.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = ["proto/onnx_wire.proto"];
    for f in files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["proto"])?;
    prost_build::Config::new().compile_fds(fds)?;
    Ok(())
}
