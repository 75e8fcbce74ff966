//! Catches the `torn` policy tearing inside an aligned 8-byte word (mixing bytes of two
//! versions), and a `torn` policy that never tears at all (an image no better than `evict`).

mod common;

use common::{for_each_word, ops, run, REGION_BYTES, WORD};
use pmem::{CrashPolicy, Medium, Region, RegionOptions};
use proptest::prelude::*;

proptest! {
    #[test]
    fn every_aligned_word_is_one_version_of_that_word(ops in ops(REGION_BYTES)) {
        run(&vec![0u8; REGION_BYTES], &ops, |model, policy, image| {
            if policy != CrashPolicy::Torn {
                return Ok(());
            }
            for_each_word(image, |line, word, value| {
                let newer = model.persisted[line]..model.versions[line].len();
                prop_assert!(
                    newer.clone().any(|v| model.word(line, v, word) == value),
                    "line {line} word {word} = {value:?} is no version of that word"
                );
                Ok(())
            })
        })?;
    }
}

#[test]
fn torn_images_do_mix_words_of_different_versions() {
    let region = Region::open(&RegionOptions::new(Medium::Sim, 4096)).unwrap();
    // Every word of line 0 changes from 0 to a distinct value; nothing persisted.
    let new: Vec<u8> = (1..=64).collect();
    region.write(0, &new);
    let mut mixed = 0;
    for seed in 0..64 {
        let image = region.crash_image(CrashPolicy::Torn, seed).unwrap();
        let words = image[..64].chunks(WORD).collect::<Vec<_>>();
        for (w, word) in words.iter().enumerate() {
            let old = [0u8; WORD];
            assert!(*word == old || *word == &new[w * WORD..(w + 1) * WORD], "seed {seed}");
        }
        let fresh = words.iter().enumerate().filter(|(w, x)| **x == &new[w * 8..w * 8 + 8]);
        let fresh = fresh.count();
        if fresh != 0 && fresh != words.len() {
            mixed += 1;
        }
    }
    assert!(mixed > 0, "64 torn images never mixed old and new words of one line");
}
