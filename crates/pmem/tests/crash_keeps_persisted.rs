//! Catches a crash image that loses persisted data: a word older than the newest completed
//! persist of its line (late fence overwriting newer data, a snapshot applied to the wrong line).

mod common;

use common::{for_each_word, ops, run, REGION_BYTES};
use proptest::prelude::*;

proptest! {
    #[test]
    fn every_word_is_at_least_as_new_as_its_last_persist(ops in ops(REGION_BYTES)) {
        run(&vec![0u8; REGION_BYTES], &ops, |model, policy, image| {
            for_each_word(image, |line, word, value| {
                let newer = model.persisted[line]..model.versions[line].len();
                prop_assert!(
                    newer.clone().any(|v| model.word(line, v, word) == value),
                    "{policy:?}: line {line} word {word} is {value:?}, older than persisted \
                     version {} (versions {:?})",
                    model.persisted[line],
                    model.versions[line]
                );
                Ok(())
            })
        })?;
    }
}
