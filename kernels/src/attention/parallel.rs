//! Runners for the kernel's independent tasks: on the calling thread
//! ([`Sequential`]), on scoped OS threads ([`ScopedThreads`]), or on any pool
//! behind [`Parallel`] (ONNX Runtime's intra-op threads in the custom op).

use std::sync::atomic::{AtomicUsize, Ordering};

use super::AttentionError;

/// Something that runs `tasks` independent closures, possibly in parallel.
pub trait Parallel {
    /// Calls `f(t)` exactly once for every `t` in `0..tasks`, in any order
    /// and on any thread, and returns when all calls have finished.
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), AttentionError>;
}

/// Runs tasks one after another on the calling thread.
#[derive(Debug, Clone, Copy, Default)]
pub struct Sequential;

impl Parallel for Sequential {
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), AttentionError> {
        (0..tasks).for_each(f);
        Ok(())
    }
}

/// Runs tasks on `threads` scoped OS threads (the caller included) that take
/// task indices from a shared counter.
#[derive(Debug, Clone, Copy)]
pub struct ScopedThreads {
    /// Number of threads, at least 1.
    pub threads: usize,
}

impl ScopedThreads {
    /// One thread per available CPU.
    pub fn available() -> Self {
        ScopedThreads {
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
        }
    }
}

impl Parallel for ScopedThreads {
    fn for_each(&self, tasks: usize, f: &(dyn Fn(usize) + Sync)) -> Result<(), AttentionError> {
        let threads = self.threads.clamp(1, tasks.max(1));
        if threads == 1 {
            return Sequential.for_each(tasks, f);
        }
        let next = AtomicUsize::new(0);
        let work = || loop {
            let t = next.fetch_add(1, Ordering::Relaxed);
            if t >= tasks {
                break;
            }
            f(t);
        };
        std::thread::scope(|scope| {
            let handles: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
            work();
            handles.into_iter().try_for_each(|h| {
                h.join()
                    .map_err(|_| AttentionError::Worker("thread panicked"))
            })
        })
    }
}
