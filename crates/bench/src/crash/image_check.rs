//! An engine's own invariant checked on every cut image (issue 37, hole (b)): the crash
//! tester's other checks see a broken persist ordering only when a lost write belongs to an
//! acknowledged commit that a later read looks at; an invariant stated on the image (the
//! distributed log's "every record with `gsn <= H` is durable before `H` is") sees it at every
//! cut that falls inside the window. The driver stays engine-agnostic: the check is a
//! callback the caller supplies (`engines::wal::dlog_horizon_check` for `wal`).

use pmem::{Region, RegionOptions};
use storage::Engine;

/// Checks one cut image against the same region *after* the run (the engine shut down
/// cleanly, so everything it had written is in place): `Ok(true)` checked and held,
/// `Ok(false)` does not apply to this image, `Err` the invariant fails, in words.
pub type ImageCheck<'a> = dyn Fn(&Region, &Region) -> Result<bool, String> + Sync + 'a;

/// Runs `check` on `image` (cut from `region`) once `engine` has shut down cleanly on `region`.
/// The workers have halted; what the engine writes now is what it had left to write. A
/// shutdown that fails leaves no later image to compare with: the image is not checked.
pub(super) fn run(
    check: &ImageCheck<'_>,
    engine: &dyn Engine,
    region: &Region,
    image: &[u8],
) -> Result<bool, String> {
    if engine.shutdown().is_err() {
        return Ok(false);
    }
    let Ok(cut) = Region::from_image(image, &RegionOptions::default()) else {
        return Ok(false);
    };
    check(&cut, region)
}
