//! Test support shared by the filter's tests, the benchmarks and the fuzz targets (feature
//! `testing`): [`MockHost`], a proxy-wasm host for one stream, and [`Recorder`], the JSON
//! scanner's events as owned values.

mod mock_host;
mod recorder;

pub use mock_host::{LocalReply, MockHost};
pub use recorder::{Ev, Recorder};
