//! Catches two opens of one peer directory both succeeding (two engines writing one database),
//! and a directory lock that outlives the engine holding it.

mod common;

use common::open;
use peers::{PeerDurability, PEERS};
use storage::DbError;

#[test]
fn second_open_of_a_directory_fails_until_the_first_engine_is_dropped() {
    for peer in PEERS {
        let dir = common::scratch();
        let first = open(peer, dir.path(), PeerDurability::Durable, 1).expect("first open");
        let err = match open(peer, dir.path(), PeerDurability::Durable, 1) {
            Ok(_) => panic!("{peer}: a second open of one directory succeeded"),
            Err(e) => e,
        };
        let message = err.to_string();
        assert!(matches!(err, DbError::Peer { retryable: false, .. }), "{peer}: {err:?}");
        assert!(!message.contains('\n'), "{peer}: multi-line error: {message:?}");
        for needle in [
            dir.path().to_str().unwrap(),
            "is already open in this process",
            "or use another --path",
        ] {
            assert!(message.contains(needle), "{peer}: {message:?} does not say {needle:?}");
        }
        // Another peer is refused by the lock too, before it looks at the directory's owner.
        let other = PEERS.iter().find(|p| *p != peer).unwrap();
        let err = open(other, dir.path(), PeerDurability::Durable, 1).err().unwrap();
        assert!(err.to_string().contains("already open"), "{peer}/{other}: {err}");

        first.shutdown().expect("shutdown");
        drop(first);
        let again = open(peer, dir.path(), PeerDurability::Durable, 1).expect("reopen");
        again.shutdown().expect("shutdown");
    }
}
