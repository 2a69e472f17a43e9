use ndarray::Array2;
use ort::session::builder::GraphOptimizationLevel;
use ort::session::Session;
use ort::value::Tensor;
fn main() -> anyhow::Result<()> {
    let a: Vec<String> = std::env::args().collect();
    let (model, l, prof) = (&a[1], a[2].parse::<usize>()?, &a[3]);
    let cfg = semroute_daemon::config::RuntimeConfig::default();
    let env = semroute_daemon::runtime::environment(&cfg)?;
    let e = |x: ort::Error<ort::session::builder::SessionBuilder>| anyhow::anyhow!(x.to_string());
    let b = Session::builder(env)
        .map_err(|x| anyhow::anyhow!(x.to_string()))?
        .with_optimization_level(GraphOptimizationLevel::All)
        .map_err(e)?
        .with_parallel_execution(false)
        .map_err(e)?
        .with_memory_pattern(true)
        .map_err(e)?;
    let b = semroute_kernels::register(b).map_err(|x| anyhow::anyhow!(x.to_string()))?;
    let mut b = if prof != "-" {
        b.with_profiling(prof).map_err(e)?
    } else {
        b
    };
    let mut s = b
        .commit_from_file(model)
        .map_err(|x| anyhow::anyhow!(x.to_string()))?;
    let ids = Array2::from_shape_fn((1, l), |(_, j)| 1000 + (j as i64 * 7919) % 20000);
    let mask = Array2::<i64>::ones((1, l));
    let types = Array2::<i64>::zeros((1, l));
    let mut ts = vec![];
    for i in 0..60 {
        let t = std::time::Instant::now();
        let _o = s.run(ort::inputs!["input_ids" => Tensor::from_array(ids.clone())?, "attention_mask" => Tensor::from_array(mask.clone())?, "token_type_ids" => Tensor::from_array(types.clone())?])?;
        if i >= 10 {
            ts.push(t.elapsed().as_secs_f64() * 1e3);
        }
    }
    ts.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{model} L={l} median {:.2} ms", ts[ts.len() / 2]);
    if prof != "-" {
        s.end_profiling()?;
    }
    Ok(())
}
