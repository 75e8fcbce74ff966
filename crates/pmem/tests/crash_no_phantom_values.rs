//! Catches a crash image holding a value no store ever wrote: bytes from outside the region,
//! zeros instead of a reopened image's contents, a torn or misplaced partial last line.

mod common;

use common::{for_each_word, ops, run, Op};
use proptest::prelude::*;

/// Regions of odd sizes (partial last line and word) starting from arbitrary contents; at
/// least one whole word, for `write_u64`.
fn case() -> impl Strategy<Value = (Vec<u8>, Vec<Op>)> {
    (8usize..700).prop_flat_map(|len| (prop::collection::vec(any::<u8>(), len), ops(len)))
}

proptest! {
    #[test]
    fn every_word_is_a_version_the_word_once_had((initial, ops) in case()) {
        run(&initial, &ops, |model, policy, image| {
            for_each_word(image, |line, word, value| {
                let all = 0..model.versions[line].len();
                prop_assert!(
                    all.clone().any(|v| model.word(line, v, word) == value),
                    "{policy:?}: line {line} word {word} is {value:?}, never written there"
                );
                Ok(())
            })
        })?;
    }
}
