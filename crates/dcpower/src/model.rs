//! Abstract total-power model — Pelley et al., "Understanding and Abstracting Total Data Center
//! Power" (thesis app. A, §A.4.1–§A.4.7): server utilisation (A.2), server power (A.3), PDU and UPS
//! losses (A.4, A.5), miscellaneous fixed power; cooling lives in [`crate::cooling`].
//! Invariant: every component's power is finite and non-negative for 0 ≤ U ≤ 1, and
//! `total_kw` is exactly the sum of the components.

use crate::cooling::{self, CoolingParams, CoolingSettings};
use crate::error::{invalid, Result};
use serde::Serialize;

/// Peak power of one server, kW: "a peak server power of 200 watts" (§A.4.4, Fig. A.6).
pub const SERVER_PEAK_KW: f64 = 0.2;

/// Every parameter of the model, with the paper's value (or, where the paper gives only a total,
/// our split of it) as the default.
#[derive(Clone, Debug, Serialize)]
pub struct ModelParams {
    /// PDU fixed loss as a fraction of peak server power. With `pdu_square_fraction`, gives
    /// "PDUs typically waste 3% of their input power" (§A.4.3) at peak; the 50/50 split between
    /// fixed and square-law loss is ours, following the cited APC model [93].
    pub pdu_idle_fraction: f64,
    /// PDU square-law loss at peak, as a fraction of peak server power: π_PDU·(P_peak)² / P_peak.
    pub pdu_square_fraction: f64,
    /// UPS fixed loss as a fraction of peak server power. With `ups_proportional` gives "UPS
    /// losses typically amount to 9% of their input power at full load" (§A.4.3); split ours.
    pub ups_idle_fraction: f64,
    /// π_UPS of (A.5): loss per watt of PDU input.
    pub ups_proportional: f64,
    /// Fixed networking, pumps and lighting as a fraction of the facility's design peak:
    /// "around 6% of peak" (§A.4.7).
    pub misc_fraction: f64,
    /// The design point: the Austin facility draws this much at U = 1 (§A.4.8: "precisely 10MW").
    pub design_total_kw: f64,
    /// Cooling plant parameters (CRAH and chiller).
    pub cooling: CoolingParams,
}

impl Default for ModelParams {
    fn default() -> Self {
        Self {
            pdu_idle_fraction: 0.015,
            pdu_square_fraction: 0.015,
            ups_idle_fraction: 0.04,
            ups_proportional: 0.05,
            misc_fraction: 0.06,
            design_total_kw: 10_000.0,
            cooling: CoolingParams::default(),
        }
    }
}

/// One data centre's operating policy: a row of Table A.3.
#[derive(Clone, Debug, Serialize)]
pub struct Scenario {
    pub name: &'static str,
    /// Load-balancing coefficient ℓ (A.2): 0 = perfect consolidation, 1 = perfect balance.
    pub load_balancing: f64,
    /// Containment index κ (A.7): fraction of server intake air supplied by a CRAH.
    pub containment: f64,
    /// Server idle power as a fraction of peak.
    pub idle_fraction: f64,
    /// Yearly-average outside temperature, °F.
    pub outside_f: f64,
    /// Integrated cooling control (§A.4.8 "Optimal Cooling") instead of static set points.
    pub optimal_cooling: bool,
}

impl Scenario {
    /// Rejects parameters outside the model's domain.
    pub fn validate(&self) -> Result<()> {
        check_unit("load_balancing (ℓ)", self.load_balancing)?;
        check_unit("idle_fraction", self.idle_fraction)?;
        if !(self.containment > 0.0 && self.containment <= 1.0) {
            return Err(invalid("containment (κ)", self.containment, "must be in (0, 1]"));
        }
        if !(-40.0..=130.0).contains(&self.outside_f) {
            return Err(invalid("outside temperature °F", self.outside_f, "must be in [-40, 130]"));
        }
        Ok(())
    }
}

fn check_unit(name: &'static str, v: f64) -> Result<()> {
    if (0.0..=1.0).contains(&v) {
        Ok(())
    } else {
        Err(invalid(name, v, "must be in [0, 1]"))
    }
}

/// Table A.3 (§A.4.8): each scenario adds one power-saving feature to the one before.
pub fn table_a3() -> Vec<Scenario> {
    let row = |name, l, k, idle, t, opt| Scenario {
        name,
        load_balancing: l,
        containment: k,
        idle_fraction: idle,
        outside_f: t,
        optimal_cooling: opt,
    };
    vec![
        row("Austin", 0.95, 0.9, 0.6, 70.0, false),
        row("Ann Arbor", 0.95, 0.9, 0.6, 50.0, false),
        row("+Consolidation", 0.25, 0.9, 0.6, 50.0, false),
        row("+PowerNap", 0.25, 0.9, 0.05, 50.0, false),
        row("+Opt. Cooling", 0.25, 0.9, 0.05, 50.0, true),
        row("+Containers", 0.25, 0.99, 0.05, 50.0, true),
    ]
}

/// (A.2): utilisation of each non-idle server, u = U / (U + (1 − U)ℓ).
pub fn server_utilisation(u_total: f64, load_balancing: f64) -> f64 {
    let active = active_fraction(u_total, load_balancing);
    if active <= 0.0 {
        0.0
    } else {
        u_total / active
    }
}

/// Fraction of servers that are non-idle, U + (1 − U)ℓ (§A.4.1); the rest are powered off.
pub fn active_fraction(u_total: f64, load_balancing: f64) -> f64 {
    u_total + (1.0 - u_total) * load_balancing
}

/// (A.3): one server's power, linear from idle to peak.
pub fn server_power(peak_kw: f64, idle_fraction: f64, utilisation: f64) -> f64 {
    let idle_kw = peak_kw * idle_fraction;
    idle_kw + (peak_kw - idle_kw) * utilisation
}

/// The equipment of one facility, sized once at its design point and shared by all scenarios.
#[derive(Clone, Debug, Serialize)]
pub struct Facility {
    /// Sum of all servers' peak power, kW.
    pub server_peak_kw: f64,
    pub servers: f64,
    /// CRAH units (fractional: the abstract model spreads load evenly over them).
    pub crah_units: f64,
    /// Heat the chiller plant removes at its rated point (the design point at U = 1), kW.
    pub chiller_rated_kw: f64,
    /// Heat at U = 0 with full consolidation (ℓ = 0: every server off), as a share of rated.
    pub chiller_idle_heat_fraction: f64,
    pub misc_kw: f64,
}

/// Power drawn by each subsystem at one operating point (one bar of Fig. A.10), kW.
#[derive(Clone, Debug, Serialize)]
pub struct Breakdown {
    pub utilisation: f64,
    pub server_utilisation: f64,
    pub active_servers_fraction: f64,
    pub servers_kw: f64,
    pub pdu_loss_kw: f64,
    pub ups_loss_kw: f64,
    pub crah_kw: f64,
    pub chiller_kw: f64,
    pub misc_kw: f64,
    pub total_kw: f64,
    /// Power usage effectiveness: total / IT (servers).
    pub pue: f64,
    pub cooling: CoolingSettings,
}

impl Breakdown {
    pub fn conditioning_kw(&self) -> f64 {
        self.pdu_loss_kw + self.ups_loss_kw
    }
    pub fn cooling_kw(&self) -> f64 {
        self.crah_kw + self.chiller_kw
    }
}

/// PDU (A.4) and UPS (A.5) losses for `servers_kw` of IT load in a fleet of `peak_kw`.
pub fn conditioning_losses(p: &ModelParams, peak_kw: f64, servers_kw: f64) -> (f64, f64) {
    let pi_pdu = p.pdu_square_fraction / peak_kw;
    let pdu = p.pdu_idle_fraction * peak_kw + pi_pdu * servers_kw * servers_kw;
    let ups = p.ups_idle_fraction * peak_kw + p.ups_proportional * (servers_kw + pdu);
    (pdu, ups)
}

/// Total power of `facility` running `scenario` at utilisation `u_total` (Fig. A.2's data flow).
pub fn evaluate(
    p: &ModelParams,
    facility: &Facility,
    scenario: &Scenario,
    u_total: f64,
) -> Result<Breakdown> {
    scenario.validate()?;
    check_unit("utilisation U", u_total)?;
    let active = active_fraction(u_total, scenario.load_balancing);
    let u_srv = server_utilisation(u_total, scenario.load_balancing);
    let per_server = server_power(SERVER_PEAK_KW, scenario.idle_fraction, u_srv);
    let servers_kw = facility.servers * active * per_server;
    let (pdu, ups) = conditioning_losses(p, facility.server_peak_kw, servers_kw);
    // All of it ends up as heat in the room, which the CRAHs move to the chilled water.
    let room_heat_kw = servers_kw + pdu + ups + facility.misc_kw;
    let cool = cooling::cooling_power(&p.cooling, facility, scenario, room_heat_kw)?;
    let total = servers_kw + pdu + ups + cool.crah_kw + cool.chiller_kw + facility.misc_kw;
    debug_assert!(total.is_finite() && total >= 0.0);
    Ok(Breakdown {
        utilisation: u_total,
        server_utilisation: u_srv,
        active_servers_fraction: active,
        servers_kw,
        pdu_loss_kw: pdu,
        ups_loss_kw: ups,
        crah_kw: cool.crah_kw,
        chiller_kw: cool.chiller_kw,
        misc_kw: facility.misc_kw,
        total_kw: total,
        pue: if servers_kw > 0.0 { total / servers_kw } else { f64::INFINITY },
        cooling: cool.settings,
    })
}

/// Sizes the facility so that `design` (Austin) draws exactly `p.design_total_kw` at U = 1, with
/// CRAHs at full flow and the chiller at its rated point there (§A.4.8: "We scale the data
/// centers such that the Austin facility consumes precisely 10MW at peak utilization").
pub fn size_facility(p: &ModelParams, design: &Scenario) -> Result<Facility> {
    design.validate()?;
    if !(p.design_total_kw > 0.0 && p.design_total_kw.is_finite()) {
        return Err(invalid("design total kW", p.design_total_kw, "must be positive"));
    }
    let misc_kw = p.misc_fraction * p.design_total_kw;
    let total_at = |peak_kw: f64| -> Result<(f64, Facility)> {
        let facility = size_for_peak(p, design, peak_kw, misc_kw);
        let b = evaluate(p, &facility, design, 1.0)?;
        Ok((b.total_kw, facility))
    };
    // Total power grows monotonically with the fleet: bisect on it (64 halvings: exact in f64).
    let (mut lo, mut hi) = (0.0, p.design_total_kw);
    for _ in 0..64 {
        let mid = 0.5 * (lo + hi);
        if total_at(mid)?.0 < p.design_total_kw {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(total_at(0.5 * (lo + hi))?.1)
}

/// CRAHs and chiller sized for `design` at U = 1 with `peak_kw` of servers.
fn size_for_peak(p: &ModelParams, design: &Scenario, peak_kw: f64, misc_kw: f64) -> Facility {
    let servers_kw = peak_kw; // At U = 1 every server is active at u = 1, whatever ℓ.
    let (pdu, ups) = conditioning_losses(p, peak_kw, servers_kw);
    let room_heat_kw = servers_kw + pdu + ups + misc_kw;
    let crah_units = room_heat_kw / cooling::crah_capacity_full_flow_kw(&p.cooling, design);
    let crah_kw = crah_units * (p.cooling.crah_idle_kw + p.cooling.crah_fan_kw);
    // At U = 0 and ℓ = 0 every server is off: idle conditioning, misc and idle CRAHs remain.
    let (pdu_idle, ups_idle) = conditioning_losses(p, peak_kw, 0.0);
    let idle_heat = pdu_idle + ups_idle + misc_kw + crah_units * p.cooling.crah_idle_kw;
    let chiller_rated_kw = room_heat_kw + crah_kw;
    Facility {
        server_peak_kw: peak_kw,
        servers: peak_kw / SERVER_PEAK_KW,
        crah_units,
        chiller_rated_kw,
        chiller_idle_heat_fraction: idle_heat / chiller_rated_kw,
        misc_kw,
    }
}

/// Shares of total power by subsystem, in Table A.1's order: servers, cooling, power
/// conditioning, network + lighting (our single "misc" term).
pub fn shares(b: &Breakdown) -> [f64; 4] {
    let t = b.total_kw;
    [b.servers_kw / t, b.cooling_kw() / t, b.conditioning_kw() / t, b.misc_kw / t]
}
