//! The captures analysed on worker threads, the results emitted in input order.

use super::{Captures, NodeResult, Pictures, Tally, Unreadable, analyse};
use crate::archive;
use crate::config::Config;
use std::collections::BTreeMap;

/// Analyses the captures on `workers` threads; `emit` gets each result in input order as soon
/// as it and every earlier one are done. With `pictures`, the first capture of each model comes
/// with the picture of its tree (`NodeResult::picture`). Returns the tally.
pub fn run(
    captures: Captures,
    config: &Config,
    workers: usize,
    pictures: bool,
    mut emit: impl FnMut(&Result<NodeResult, Unreadable>),
) -> Tally {
    let claims = Pictures::default();
    let claims = pictures.then_some(&claims);
    use std::sync::atomic::{AtomicUsize, Ordering};
    let next = AtomicUsize::new(0);
    // How far the output has got: workers stay within a window of it, so that one slow capture
    // cannot make the reorder buffer hold the rest of the fleet.
    let emitted = AtomicUsize::new(0);
    let window = workers.max(1) * 16;
    let total = captures.len();
    let mut tally = Tally::default();
    // One budget for every archive the workers hold at once (issue 14).
    let budget = archive::Budget::new(archive::RUN_BUDGET_BYTES);
    let (tx, rx) =
        std::sync::mpsc::sync_channel::<(usize, Result<NodeResult, Unreadable>)>(workers * 4);
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            let tx = tx.clone();
            let next = &next;
            let emitted = &emitted;
            let captures = &captures;
            let budget = &budget;
            s.spawn(move || {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= total {
                        break;
                    }
                    while i >= emitted.load(Ordering::Relaxed) + window {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    let Some(capture) = captures.get(i) else {
                        break;
                    };
                    let r = match capture {
                        Err(u) => Err(u),
                        Ok(path) => {
                            // A capture that panics the analysis is reported, never fatal.
                            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                                analyse(&path, config, budget, claims.map(|c| (c, i)))
                            })) {
                                Ok(Ok(n)) => Ok(n),
                                Ok(Err(reason)) => Err(Unreadable {
                                    capture: path.display().to_string(),
                                    reason,
                                }),
                                Err(_) => Err(Unreadable {
                                    capture: path.display().to_string(),
                                    reason:
                                        "gdrdoctor failed on this capture (a bug: please report it)"
                                            .into(),
                                }),
                            }
                        }
                    };
                    if tx.send((i, r)).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        // Reorder: results arrive nearly in order; hold the early ones until their turn.
        let mut pending: BTreeMap<usize, Result<NodeResult, Unreadable>> = BTreeMap::new();
        let mut want = 0;
        for (i, r) in rx {
            pending.insert(i, r);
            while let Some(r) = pending.remove(&want) {
                match &r {
                    Ok(n) => tally.add(n),
                    Err(_) => tally.unreadable += 1,
                }
                emit(&r);
                want += 1;
                emitted.store(want, Ordering::Relaxed);
            }
        }
    });
    tally
}
