//! TATP, the Telecom Application Transaction Processing benchmark (spec v1.0; Neuvonen et al.):
//! a home location register of subscribers, access info, special facilities and call
//! forwarding; the seven transactions in the standard mix 35/10/35/2/14/2/2 with the
//! non-uniform subscriber-id distribution NURand(A, 1, P). Pelley et al. (VLDB 2014, §4,
//! Table 3) and Wang & Johnson (VLDB 2014, §5) run the full mix and Update-Location alone (the
//! `txn` option).
//!
//! Keys: subscriber `s_id` (1-based); `sub_nbr` index keyed by the number's value (the spec's
//! population makes it `s_id`, zero-padded to 15 digits); access info and special facility
//! `s_id << 2 | (type − 1)`; call forwarding `special_facility_key << 2 | start_time / 8`.
//! Subscribers carry a hidden `version`, bumped by every update, so an acknowledged update
//! stays verifiable however later updates overwrite the columns.
//!
//! Invariant (referential): every subscriber 1..=P exists with its `sub_nbr` index entry; every
//! access-info and special-facility row belongs to an existing subscriber (1-4 of each per
//! subscriber); every call-forwarding row belongs to an existing special facility; acknowledged
//! subscriber updates survive.

use crate::generators::{nurand, WorkerRng};
use crate::util::{
    check_read, create_table, fill_digits, get_u64, lookup_table, put_u32, put_u64, read_existing,
    read_row, scan_table, update_existing, Loader, Outcome, Retrier,
};
use crate::{Ack, TxnDone, Worker, Workload};
use rand::Rng;
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use storage::{DbError, Engine, TableId, Txn};

pub const SUBSCRIBER_TABLE: &str = "tatp_subscriber";
pub const SUB_NBR_TABLE: &str = "tatp_sub_nbr";
pub const ACCESS_INFO_TABLE: &str = "tatp_access_info";
pub const SPECIAL_FACILITY_TABLE: &str = "tatp_special_facility";
pub const CALL_FORWARDING_TABLE: &str = "tatp_call_forwarding";

/// Subscribers per unit of `scale` in [`crate::WorkloadOptions`] (Shore-MT's TATP scaling,
/// as in Pelley et al.'s Table 3).
pub const SUBSCRIBERS_PER_SCALE: u64 = 10_000;
const MAX_SUBSCRIBERS: u64 = 1_000_000_000;

mod subscriber {
    pub const S_ID: usize = 0;
    pub const SUB_NBR: usize = 8;
    pub const SUB_NBR_LEN: usize = 15;
    /// bit_1 .. bit_10 as bits 0..9 of a u16.
    pub const BITS: usize = 23;
    pub const HEX: usize = 25;
    pub const BYTE2: usize = 35;
    pub const MSC_LOCATION: usize = 45;
    pub const VLR_LOCATION: usize = 49;
    pub const VERSION: usize = 56;
    pub const ROW: u32 = 64;
}

mod sub_nbr {
    pub const S_ID: usize = 0;
    pub const ROW: u32 = 8;
}

mod access_info {
    pub const S_ID: usize = 0;
    pub const AI_TYPE: usize = 8;
    pub const DATA1: usize = 9;
    pub const DATA3: usize = 11;
    pub const DATA4: usize = 14;
    pub const ROW: u32 = 24;
}

mod special_facility {
    pub const S_ID: usize = 0;
    pub const SF_TYPE: usize = 8;
    pub const IS_ACTIVE: usize = 9;
    pub const ERROR_CNTRL: usize = 10;
    pub const DATA_A: usize = 11;
    pub const DATA_B: usize = 12;
    pub const ROW: u32 = 24;
}

mod call_forwarding {
    pub const S_ID: usize = 0;
    pub const SF_TYPE: usize = 8;
    pub const START_TIME: usize = 9;
    pub const END_TIME: usize = 10;
    pub const NUMBERX: usize = 11;
    pub const NUMBERX_LEN: usize = 15;
    pub const ROW: u32 = 32;
}

pub fn access_info_key(s_id: u64, ai_type: u8) -> u64 {
    (s_id << 2) | (ai_type.clamp(1, 4) - 1) as u64
}

pub fn special_facility_key(s_id: u64, sf_type: u8) -> u64 {
    (s_id << 2) | (sf_type.clamp(1, 4) - 1) as u64
}

pub fn call_forwarding_key(s_id: u64, sf_type: u8, start_time: u8) -> u64 {
    (special_facility_key(s_id, sf_type) << 2) | (start_time / 8).min(2) as u64
}

/// The seven transactions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum TatpTxn {
    GetSubscriberData,
    GetNewDestination,
    GetAccessData,
    UpdateSubscriberData,
    UpdateLocation,
    InsertCallForwarding,
    DeleteCallForwarding,
}

impl TatpTxn {
    pub const ALL: [TatpTxn; 7] = [
        TatpTxn::GetSubscriberData,
        TatpTxn::GetNewDestination,
        TatpTxn::GetAccessData,
        TatpTxn::UpdateSubscriberData,
        TatpTxn::UpdateLocation,
        TatpTxn::InsertCallForwarding,
        TatpTxn::DeleteCallForwarding,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TatpTxn::GetSubscriberData => "get-subscriber-data",
            TatpTxn::GetNewDestination => "get-new-destination",
            TatpTxn::GetAccessData => "get-access-data",
            TatpTxn::UpdateSubscriberData => "update-subscriber-data",
            TatpTxn::UpdateLocation => "update-location",
            TatpTxn::InsertCallForwarding => "insert-call-forwarding",
            TatpTxn::DeleteCallForwarding => "delete-call-forwarding",
        }
    }

    pub fn parse(s: &str) -> Result<TatpTxn, String> {
        TatpTxn::ALL.into_iter().find(|t| t.name() == s).ok_or_else(|| {
            let names: Vec<_> = TatpTxn::ALL.iter().map(|t| t.name()).collect();
            format!("unknown TATP transaction {s:?}: use one of {}", names.join(", "))
        })
    }
}

/// How subscriber ids are drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum SubscriberDistribution {
    /// The spec's NURand(A, 1, P), A = 65535 / 1048575 / 2097151 by population size.
    NonUniform,
    Uniform,
}

/// TATP's options. `Default`: 100,000 subscribers (the spec's smallest population), the
/// standard mix, non-uniform ids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TatpConfig {
    pub subscribers: u64,
    /// Weights in [`TatpTxn::ALL`] order: 35/10/35/2/14/2/2.
    pub mix: [u32; 7],
    /// Run this transaction alone (overrides `mix`).
    pub txn: Option<TatpTxn>,
    pub distribution: SubscriberDistribution,
    pub max_retries: u32,
}

impl Default for TatpConfig {
    fn default() -> Self {
        TatpConfig {
            subscribers: 100_000,
            mix: [35, 10, 35, 2, 14, 2, 2],
            txn: None,
            distribution: SubscriberDistribution::NonUniform,
            max_retries: 1000,
        }
    }
}

impl TatpConfig {
    pub fn validate(&self) -> Result<(), String> {
        if self.subscribers == 0 || self.subscribers > MAX_SUBSCRIBERS {
            return Err(format!(
                "subscribers must be 1..={MAX_SUBSCRIBERS}, got {}",
                self.subscribers
            ));
        }
        if self.txn.is_none() && self.mix.iter().map(|w| *w as u64).sum::<u64>() == 0 {
            return Err("every TATP mix weight is zero: nothing to run".to_string());
        }
        Ok(())
    }

    /// NURand's A for this population (TATP §4.1).
    pub fn nurand_a(&self) -> u64 {
        match self.subscribers {
            0..=1_000_000 => 65_535,
            1_000_001..=10_000_000 => 1_048_575,
            _ => 2_097_151,
        }
    }
}

/// One transaction with its parameters (TATP §3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TatpInput {
    GetSubscriberData { s_id: u64 },
    GetNewDestination { s_id: u64, sf_type: u8, start_time: u8, end_time: u8 },
    GetAccessData { s_id: u64, ai_type: u8 },
    UpdateSubscriberData { s_id: u64, bit_1: bool, sf_type: u8, data_a: u8 },
    UpdateLocation { sub_nbr: u64, vlr_location: u32 },
    InsertCallForwarding { sub_nbr: u64, sf_type: u8, start_time: u8, end_time: u8, numberx: u64 },
    DeleteCallForwarding { sub_nbr: u64, sf_type: u8, start_time: u8 },
}

impl TatpInput {
    pub fn txn(&self) -> TatpTxn {
        match self {
            TatpInput::GetSubscriberData { .. } => TatpTxn::GetSubscriberData,
            TatpInput::GetNewDestination { .. } => TatpTxn::GetNewDestination,
            TatpInput::GetAccessData { .. } => TatpTxn::GetAccessData,
            TatpInput::UpdateSubscriberData { .. } => TatpTxn::UpdateSubscriberData,
            TatpInput::UpdateLocation { .. } => TatpTxn::UpdateLocation,
            TatpInput::InsertCallForwarding { .. } => TatpTxn::InsertCallForwarding,
            TatpInput::DeleteCallForwarding { .. } => TatpTxn::DeleteCallForwarding,
        }
    }
}

/// The deterministic input stream of one TATP worker.
pub struct TatpInputs {
    cfg: Arc<TatpConfig>,
    rng: WorkerRng,
    cumulative: [u64; 7],
}

impl TatpInputs {
    fn new(cfg: Arc<TatpConfig>, worker: usize, seed: u64) -> Self {
        let weights = match cfg.txn {
            Some(t) => {
                let mut w = [0; 7];
                w[TatpTxn::ALL.iter().position(|x| *x == t).unwrap_or(0)] = 1;
                w
            }
            None => cfg.mix,
        };
        let mut cumulative = [0u64; 7];
        let mut sum = 0u64;
        for (c, w) in cumulative.iter_mut().zip(weights) {
            sum += w as u64;
            *c = sum;
        }
        TatpInputs { cfg, rng: WorkerRng::for_worker(seed, worker, 1), cumulative }
    }

    /// A subscriber id per the configured distribution.
    pub fn subscriber(&mut self) -> u64 {
        let p = self.cfg.subscribers;
        match self.cfg.distribution {
            SubscriberDistribution::NonUniform => {
                nurand(&mut self.rng, self.cfg.nurand_a(), 0, 1, p)
            }
            SubscriberDistribution::Uniform => self.rng.gen_range(1..=p),
        }
    }

    fn start_time(&mut self) -> u8 {
        [0u8, 8, 16][self.rng.gen_range(0..3)]
    }

    pub fn next_input(&mut self) -> TatpInput {
        let r = self.rng.gen_range(0..self.cumulative[6]);
        let which = self.cumulative.iter().position(|c| r < *c).unwrap_or(0);
        let s_id = self.subscriber();
        match TatpTxn::ALL[which] {
            TatpTxn::GetSubscriberData => TatpInput::GetSubscriberData { s_id },
            TatpTxn::GetNewDestination => TatpInput::GetNewDestination {
                s_id,
                sf_type: self.rng.gen_range(1..=4),
                start_time: self.start_time(),
                end_time: self.rng.gen_range(1..=24),
            },
            TatpTxn::GetAccessData => {
                TatpInput::GetAccessData { s_id, ai_type: self.rng.gen_range(1..=4) }
            }
            TatpTxn::UpdateSubscriberData => TatpInput::UpdateSubscriberData {
                s_id,
                bit_1: self.rng.gen(),
                sf_type: self.rng.gen_range(1..=4),
                data_a: self.rng.gen(),
            },
            TatpTxn::UpdateLocation => {
                TatpInput::UpdateLocation { sub_nbr: s_id, vlr_location: self.rng.gen() }
            }
            TatpTxn::InsertCallForwarding => TatpInput::InsertCallForwarding {
                sub_nbr: s_id,
                sf_type: self.rng.gen_range(1..=4),
                start_time: self.start_time(),
                end_time: self.rng.gen_range(1..=24),
                numberx: self.rng.gen_range(0..1_000_000_000_000_000),
            },
            TatpTxn::DeleteCallForwarding => TatpInput::DeleteCallForwarding {
                sub_nbr: s_id,
                sf_type: self.rng.gen_range(1..=4),
                start_time: self.start_time(),
            },
        }
    }
}

#[derive(Clone, Copy)]
struct Tables {
    subscriber: TableId,
    sub_nbr: TableId,
    access_info: TableId,
    special_facility: TableId,
    call_forwarding: TableId,
}

const SPECS: [(&str, u32); 5] = [
    (SUBSCRIBER_TABLE, subscriber::ROW),
    (SUB_NBR_TABLE, sub_nbr::ROW),
    (ACCESS_INFO_TABLE, access_info::ROW),
    (SPECIAL_FACILITY_TABLE, special_facility::ROW),
    (CALL_FORWARDING_TABLE, call_forwarding::ROW),
];

impl Tables {
    fn from_ids(ids: [TableId; 5]) -> Tables {
        Tables {
            subscriber: ids[0],
            sub_nbr: ids[1],
            access_info: ids[2],
            special_facility: ids[3],
            call_forwarding: ids[4],
        }
    }

    fn lookup(engine: &dyn Engine) -> Result<Tables, DbError> {
        let mut ids = [0; 5];
        for (id, (name, row)) in ids.iter_mut().zip(SPECS) {
            *id = lookup_table(engine, name, row)?;
        }
        Ok(Tables::from_ids(ids))
    }
}

/// The TATP workload. Build with [`Tatp::new`].
pub struct Tatp {
    cfg: Arc<TatpConfig>,
}

impl Tatp {
    pub fn new(cfg: TatpConfig) -> Result<Tatp, String> {
        cfg.validate()?;
        Ok(Tatp { cfg: Arc::new(cfg) })
    }

    pub fn config(&self) -> &TatpConfig {
        &self.cfg
    }

    /// The input stream of one worker, without an engine (for tests and tools).
    pub fn inputs(&self, worker: usize, seed: u64) -> TatpInputs {
        TatpInputs::new(self.cfg.clone(), worker, seed)
    }
}

/// Writes `value` as `len` zero-padded decimal digits.
fn put_digits(buf: &mut [u8], mut value: u64) {
    for b in buf.iter_mut().rev() {
        *b = b'0' + (value % 10) as u8;
        value /= 10;
    }
}

/// A random subset of 1..=4 of random size 1..=4 (the types of a subscriber's access-info and
/// special-facility rows, TATP §4.2).
fn random_types(rng: &mut WorkerRng) -> ([u8; 4], usize) {
    let mut types = [1u8, 2, 3, 4];
    for i in (1..4).rev() {
        types.swap(i, rng.gen_range(0..=i));
    }
    (types, rng.gen_range(1..=4))
}

fn load_subscriber(
    loader: &mut Loader,
    t: &Tables,
    s: u64,
    rng: &mut WorkerRng,
    rows: &mut [Vec<u8>; 5],
) -> Result<(), DbError> {
    let [sub, idx, ai, sf, cf] = rows;
    put_u64(sub, subscriber::S_ID, s);
    put_digits(&mut sub[subscriber::SUB_NBR..subscriber::SUB_NBR + subscriber::SUB_NBR_LEN], s);
    let bits = rng.gen_range(0u32..1 << 10);
    sub[subscriber::BITS..subscriber::BITS + 2].copy_from_slice(&(bits as u16).to_le_bytes());
    for h in &mut sub[subscriber::HEX..subscriber::HEX + 10] {
        *h = rng.gen_range(0..16);
    }
    rng.fill(&mut sub[subscriber::BYTE2..subscriber::BYTE2 + 10]);
    put_u32(sub, subscriber::MSC_LOCATION, rng.gen());
    put_u32(sub, subscriber::VLR_LOCATION, rng.gen());
    put_u64(sub, subscriber::VERSION, 1);
    loader.insert(t.subscriber, s, sub)?;
    put_u64(idx, sub_nbr::S_ID, s);
    loader.insert(t.sub_nbr, s, idx)?;

    let (types, n) = random_types(rng);
    for ai_type in &types[..n] {
        put_u64(ai, access_info::S_ID, s);
        ai[access_info::AI_TYPE] = *ai_type;
        rng.fill(&mut ai[access_info::DATA1..access_info::DATA3]);
        for b in &mut ai[access_info::DATA3..access_info::DATA4 + 5] {
            *b = b'A' + rng.gen_range(0..26);
        }
        loader.insert(t.access_info, access_info_key(s, *ai_type), ai)?;
    }
    let (types, n) = random_types(rng);
    for sf_type in &types[..n] {
        put_u64(sf, special_facility::S_ID, s);
        sf[special_facility::SF_TYPE] = *sf_type;
        sf[special_facility::IS_ACTIVE] = (rng.gen_range(0..100) < 85) as u8;
        sf[special_facility::ERROR_CNTRL] = rng.gen();
        sf[special_facility::DATA_A] = rng.gen();
        for b in &mut sf[special_facility::DATA_B..special_facility::DATA_B + 5] {
            *b = b'A' + rng.gen_range(0..26);
        }
        loader.insert(t.special_facility, special_facility_key(s, *sf_type), sf)?;
        // 0-3 call-forwarding rows with distinct start times.
        let count = rng.gen_range(0..=3usize);
        let mut starts = [0u8, 8, 16];
        for i in (1..3).rev() {
            starts.swap(i, rng.gen_range(0..=i));
        }
        for start in &starts[..count] {
            put_u64(cf, call_forwarding::S_ID, s);
            cf[call_forwarding::SF_TYPE] = *sf_type;
            cf[call_forwarding::START_TIME] = *start;
            cf[call_forwarding::END_TIME] = start + rng.gen_range(1..=8);
            let numberx =
                call_forwarding::NUMBERX..call_forwarding::NUMBERX + call_forwarding::NUMBERX_LEN;
            fill_digits(rng, &mut cf[numberx]);
            loader.insert(t.call_forwarding, call_forwarding_key(s, *sf_type, *start), cf)?;
        }
    }
    Ok(())
}

impl Workload for Tatp {
    /// The five tables as loaded (the run inserts and deletes call-forwarding rows about
    /// equally).
    fn estimated_bytes(&self) -> Option<u64> {
        let p = self.cfg.subscribers;
        let expected = [p, p, p * 5 / 2, p * 5 / 2, p * 15 / 4];
        Some(crate::util::estimate_bytes(SPECS.iter().zip(expected).map(|((_, row), n)| (*row, n))))
    }

    fn resolved_config(&self) -> serde_json::Value {
        serde_json::to_value(self.config()).unwrap_or(serde_json::Value::Null)
    }

    fn name(&self) -> &'static str {
        "tatp"
    }

    fn load(
        &self,
        engine: &dyn Engine,
        progress: &(dyn Fn(u64, u64) + Sync),
    ) -> Result<(), DbError> {
        let p = self.cfg.subscribers;
        // Expected rows: 2.5 access-info, 2.5 special-facility, 3.75 call-forwarding each.
        let expected = [p, p, p * 5 / 2, p * 5 / 2, p * 15 / 4];
        let mut ids = [0; 5];
        for ((id, (name, row)), rows) in ids.iter_mut().zip(SPECS).zip(expected) {
            *id = create_table(engine, name, row, rows)?;
        }
        let t = Tables::from_ids(ids);
        let mut loader = Loader::new(engine, progress, expected.iter().sum());
        let mut rng = WorkerRng::new(0x7461_7470);
        let mut rows = SPECS.map(|(_, row)| vec![0u8; row as usize]);
        for s in 1..=p {
            load_subscriber(&mut loader, &t, s, &mut rng, &mut rows)?;
        }
        loader.finish()
    }

    fn attach(&self, engine: &dyn Engine) -> Result<(), DbError> {
        Tables::lookup(engine).map(|_| ())
    }

    fn worker(&self, worker: usize, seed: u64) -> Box<dyn Worker> {
        Box::new(TatpWorker {
            inputs: self.inputs(worker, seed),
            worker,
            retrier: Retrier::new(self.cfg.max_retries, seed, worker),
            tables: None,
            row: Vec::new(),
        })
    }

    fn check(&self, engine: &dyn Engine) -> Result<(), String> {
        let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
        check_subscribers(engine, &t, self.cfg.subscribers)?;
        let p = self.cfg.subscribers;
        let ai = check_typed(engine, t.access_info, p, "access-info", access_info::AI_TYPE)?;
        let sf = check_typed(
            engine,
            t.special_facility,
            p,
            "special-facility",
            special_facility::SF_TYPE,
        )?;
        check_call_forwarding(engine, t.call_forwarding, p, &sf)?;
        for s in 1..=p as usize {
            if ai[s] == 0 || sf[s] == 0 {
                return Err(format!(
                    "subscriber {s} has {} access-info and {} special-facility rows (needs 1-4)",
                    ai[s].count_ones(),
                    sf[s].count_ones()
                ));
            }
        }
        Ok(())
    }

    fn verify_acks(&self, engine: &dyn Engine, acks: &[Ack]) -> Result<(), String> {
        let t = Tables::lookup(engine).map_err(|e| e.to_string())?;
        let mut row = Vec::new();
        for ack in acks {
            if ack.table != t.subscriber {
                return Err(format!(
                    "ack for table {}, which TATP does not acknowledge",
                    ack.table
                ));
            }
            if !check_read(engine, t.subscriber, ack.key, &mut row)? {
                return Err(format!("acknowledged update lost: subscriber {} is gone", ack.key));
            }
            let version = if row.len() == subscriber::ROW as usize {
                get_u64(&row, subscriber::VERSION)
            } else {
                0
            };
            if version < ack.value {
                return Err(format!(
                    "acknowledged update of subscriber {} lost: version {version} < acked {}",
                    ack.key, ack.value
                ));
            }
        }
        Ok(())
    }
}

fn check_subscribers(engine: &dyn Engine, t: &Tables, p: u64) -> Result<(), String> {
    let mut next = 1u64;
    let mut digits = [0u8; subscriber::SUB_NBR_LEN];
    scan_table(engine, t.subscriber, 0, u64::MAX, &mut |key, row| {
        if key != next || get_u64(row, subscriber::S_ID) != key {
            return Err(format!("subscriber {next} is missing or misplaced (found key {key})"));
        }
        put_digits(&mut digits, key);
        if row[subscriber::SUB_NBR..subscriber::SUB_NBR + subscriber::SUB_NBR_LEN] != digits {
            return Err(format!("subscriber {key}: sub_nbr does not match s_id"));
        }
        if get_u64(row, subscriber::VERSION) == 0 {
            return Err(format!("subscriber {key}: version 0"));
        }
        next += 1;
        Ok(())
    })?;
    if next != p + 1 {
        return Err(format!("{} subscribers, expected {p}", next - 1));
    }
    let mut next = 1u64;
    scan_table(engine, t.sub_nbr, 0, u64::MAX, &mut |key, row| {
        if key != next || get_u64(row, sub_nbr::S_ID) != key {
            return Err(format!("sub_nbr index entry {next} is missing or wrong (found {key})"));
        }
        next += 1;
        Ok(())
    })?;
    if next != p + 1 {
        return Err(format!("{} sub_nbr index entries, expected {p}", next - 1));
    }
    Ok(())
}

/// Checks access-info or special-facility rows; returns, per subscriber, the bitmask of types
/// present.
fn check_typed(
    engine: &dyn Engine,
    table: TableId,
    p: u64,
    what: &str,
    type_offset: usize,
) -> Result<Vec<u8>, String> {
    let mut present = vec![0u8; p as usize + 1];
    scan_table(engine, table, 0, u64::MAX, &mut |key, row| {
        let (s, ty) = (key >> 2, (key & 3) as u8 + 1);
        if s == 0 || s > p {
            return Err(format!(
                "{what} row {key:#x} belongs to subscriber {s}, which does not exist"
            ));
        }
        if get_u64(row, 0) != s || row[type_offset] != ty {
            return Err(format!("{what} row {key:#x}: s_id or type field does not match its key"));
        }
        present[s as usize] |= 1 << (ty - 1);
        Ok(())
    })?;
    Ok(present)
}

fn check_call_forwarding(
    engine: &dyn Engine,
    table: TableId,
    p: u64,
    facilities: &[u8],
) -> Result<(), String> {
    scan_table(engine, table, 0, u64::MAX, &mut |key, row| {
        let (s, sf_type, slot) = (key >> 4, ((key >> 2) & 3) as u8 + 1, (key & 3) as u8);
        if s == 0 || s > p || slot > 2 {
            return Err(format!("call-forwarding row {key:#x} has an impossible key"));
        }
        if facilities[s as usize] & (1 << (sf_type - 1)) == 0 {
            return Err(format!(
                "call-forwarding row {key:#x} refers to special facility {s}/{sf_type}, which does \
                 not exist"
            ));
        }
        let start = row[call_forwarding::START_TIME];
        let end = row[call_forwarding::END_TIME];
        if get_u64(row, call_forwarding::S_ID) != s
            || row[call_forwarding::SF_TYPE] != sf_type
            || start != slot * 8
            || !(1..=24).contains(&end)
        {
            return Err(format!("call-forwarding row {key:#x}: fields do not match its key"));
        }
        Ok(())
    })?;
    Ok(())
}

struct TatpWorker {
    inputs: TatpInputs,
    worker: usize,
    retrier: Retrier,
    tables: Option<Tables>,
    row: Vec<u8>,
}

type DbResult<T> = std::result::Result<T, DbError>;

/// Finds a subscriber through the `sub_nbr` index (as the spec's SQL does).
fn lookup_sub_nbr(txn: &mut dyn Txn, t: &Tables, number: u64, row: &mut Vec<u8>) -> DbResult<u64> {
    read_existing(txn, t.sub_nbr, number, row, sub_nbr::ROW as usize, "sub_nbr index entry")?;
    Ok(get_u64(row, sub_nbr::S_ID))
}

/// Bumps the subscriber's version and rewrites `bytes` at `offset`; returns the new version.
///
/// One `update` call covers both fields (the bytes from the first to the end of the last), so
/// the subscriber row is one page update, as the paper counts it: Pelley's In-Place Updates
/// pays `persist_wal` + `persist_page` per update call, and two calls made Update-Location
/// cost 13 barriers instead of its 6 + commit (000 §6.1: "TATP ... only updates a single page
/// per transaction").
fn update_subscriber(
    txn: &mut dyn Txn,
    t: &Tables,
    s_id: u64,
    offset: usize,
    bytes: &[u8],
    row: &mut Vec<u8>,
) -> DbResult<u64> {
    read_existing(txn, t.subscriber, s_id, row, subscriber::ROW as usize, "subscriber")?;
    let version = get_u64(row, subscriber::VERSION).wrapping_add(1);
    row[offset..offset + bytes.len()].copy_from_slice(bytes);
    row[subscriber::VERSION..subscriber::VERSION + 8].copy_from_slice(&version.to_le_bytes());
    let start = offset.min(subscriber::VERSION);
    let end = (offset + bytes.len()).max(subscriber::VERSION + 8);
    update_existing(txn, t.subscriber, s_id, start as u32, &row[start..end], "subscriber")?;
    Ok(version)
}

fn run_input(
    txn: &mut dyn Txn,
    t: &Tables,
    input: &TatpInput,
    row: &mut Vec<u8>,
) -> DbResult<Outcome<Vec<Ack>>> {
    let none = Vec::new;
    match *input {
        TatpInput::GetSubscriberData { s_id } => {
            read_existing(txn, t.subscriber, s_id, row, subscriber::ROW as usize, "subscriber")?;
            Ok(Outcome::ReadOnly(none()))
        }
        TatpInput::GetNewDestination { s_id, sf_type, start_time, end_time } => {
            let key = special_facility_key(s_id, sf_type);
            let found =
                read_row(txn, t.special_facility, key, row, special_facility::ROW as usize)?;
            if found && row[special_facility::IS_ACTIVE] == 1 {
                let mut numbers = 0u32;
                txn.scan(t.call_forwarding, key << 2, (key << 2) | 2, 3, &mut |_, cf| {
                    if cf.len() == call_forwarding::ROW as usize
                        && cf[call_forwarding::START_TIME] <= start_time
                        && end_time < cf[call_forwarding::END_TIME]
                    {
                        numbers += 1;
                    }
                    true
                })?;
                std::hint::black_box(numbers);
            }
            Ok(Outcome::ReadOnly(none()))
        }
        TatpInput::GetAccessData { s_id, ai_type } => {
            let key = access_info_key(s_id, ai_type);
            read_row(txn, t.access_info, key, row, access_info::ROW as usize)?;
            Ok(Outcome::ReadOnly(none()))
        }
        TatpInput::UpdateSubscriberData { s_id, bit_1, sf_type, data_a } => {
            read_existing(txn, t.subscriber, s_id, row, subscriber::ROW as usize, "subscriber")?;
            let bits = u16::from_le_bytes([row[subscriber::BITS], row[subscriber::BITS + 1]]);
            let bits = (bits & !1) | bit_1 as u16;
            let version =
                update_subscriber(txn, t, s_id, subscriber::BITS, &bits.to_le_bytes(), row)?;
            let key = special_facility_key(s_id, sf_type);
            let at = special_facility::DATA_A as u32;
            if !txn.update(t.special_facility, key, at, &[data_a])? {
                // No such facility: the spec's update touches no row and the transaction fails.
                return Ok(Outcome::Rollback(none()));
            }
            Ok(Outcome::Commit(vec![Ack { table: t.subscriber, key: s_id, value: version }]))
        }
        TatpInput::UpdateLocation { sub_nbr, vlr_location } => {
            let s_id = lookup_sub_nbr(txn, t, sub_nbr, row)?;
            let vlr = vlr_location.to_le_bytes();
            let version = update_subscriber(txn, t, s_id, subscriber::VLR_LOCATION, &vlr, row)?;
            Ok(Outcome::Commit(vec![Ack { table: t.subscriber, key: s_id, value: version }]))
        }
        TatpInput::InsertCallForwarding { sub_nbr, sf_type, start_time, end_time, numberx } => {
            let s_id = lookup_sub_nbr(txn, t, sub_nbr, row)?;
            let mut types = 0u8;
            let (low, high) = (special_facility_key(s_id, 1), special_facility_key(s_id, 4));
            txn.scan(t.special_facility, low, high, 4, &mut |key, _| {
                types |= 1 << (key & 3);
                true
            })?;
            let key = call_forwarding_key(s_id, sf_type, start_time);
            // Foreign key to a missing facility, or an existing (s_id, sf_type, start): fails.
            if types & (1 << (sf_type.clamp(1, 4) - 1)) == 0
                || read_row(txn, t.call_forwarding, key, row, call_forwarding::ROW as usize)?
            {
                return Ok(Outcome::Rollback(none()));
            }
            let mut cf = [0u8; call_forwarding::ROW as usize];
            put_u64(&mut cf, call_forwarding::S_ID, s_id);
            cf[call_forwarding::SF_TYPE] = sf_type;
            cf[call_forwarding::START_TIME] = start_time;
            cf[call_forwarding::END_TIME] = end_time;
            put_digits(&mut cf[call_forwarding::NUMBERX..call_forwarding::NUMBERX + 15], numberx);
            txn.insert(t.call_forwarding, key, &cf)?;
            Ok(Outcome::Commit(none()))
        }
        TatpInput::DeleteCallForwarding { sub_nbr, sf_type, start_time } => {
            let s_id = lookup_sub_nbr(txn, t, sub_nbr, row)?;
            let key = call_forwarding_key(s_id, sf_type, start_time);
            if txn.delete(t.call_forwarding, key)? {
                Ok(Outcome::Commit(none()))
            } else {
                Ok(Outcome::Rollback(none()))
            }
        }
    }
}

impl Worker for TatpWorker {
    fn run_one(&mut self, engine: &dyn Engine) -> DbResult<TxnDone> {
        let t = match self.tables {
            Some(t) => t,
            None => {
                let t = Tables::lookup(engine)?;
                self.tables = Some(t);
                t
            }
        };
        let input = self.inputs.next_input();
        let row = &mut self.row;
        let r = self.retrier.run(engine, self.worker, |txn| run_input(txn, &t, &input, row))?;
        Ok(TxnDone { kind: input.txn().name(), token: r.token, retries: r.retries, acks: r.value })
    }
}
