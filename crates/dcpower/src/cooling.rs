//! Cooling — thesis app. A §A.4.4–§A.4.6: air recirculation through a containment index κ (A.7),
//! CRAH heat exchange by the modified effectiveness-NTU method (A.8), CRAH fan power (A.9), and a
//! chiller whose power at the reference conditions is the paper's polynomial
//! 742.8U² + 1844.6U + 538.7 kW, scaled to other outside and chilled-water temperatures by the
//! Carnot lift. Invariant: the CRAH flow fraction is in (0, 1] and the server inlet temperature
//! stays at or below the 77 °F limit under optimal cooling.

use crate::error::{invalid, Error, Result};
use crate::model::{Facility, Scenario};
use serde::Serialize;

/// Specific heat of air, kJ/(kg·K).
const CP_AIR: f64 = 1.006;
/// Density of air, kg/m³ (sea level, ~20 °C).
const AIR_DENSITY: f64 = 1.2;
const M3S_PER_CFM: f64 = 0.000_471_947_443;
/// A temperature difference in °F, in kelvin.
const K_PER_F: f64 = 5.0 / 9.0;
const RANKINE_OFFSET: f64 = 459.67;
/// Grid steps of the optimal-cooling search over CRAH flow (1% steps).
const FLOW_STEPS: u32 = 100;

/// Cooling-plant parameters; defaults from §A.4.4–§A.4.8 unless marked "ours".
#[derive(Clone, Debug, Serialize)]
pub struct CoolingParams {
    /// E in (A.8): "peak heat transfer efficiency of 0.5" (§A.4.5, Fig. A.7).
    pub crah_effectiveness: f64,
    /// "a maximum airflow of 6900 CFM" per CRAH (§A.4.5).
    pub crah_max_flow_cfm: f64,
    /// P_CRAH,Dyn in (A.9): "peak fan power of 3kW" (§A.4.5).
    pub crah_fan_kw: f64,
    /// P_CRAH,Idle in (A.9): "an idle power cost of 0.1 kW" (§A.4.5).
    pub crah_idle_kw: f64,
    /// "the typical maximum safe server inlet temperature of 77°F" (§A.4.4).
    pub inlet_max_f: f64,
    /// Static set points of the conventional scenarios: "chilled water and CRAH air supply
    /// temperatures set to 45°F and 65°F" (§A.4.8).
    pub static_chilled_water_f: f64,
    pub static_supply_air_f: f64,
    /// Chiller power at the reference conditions, kW, as c0 + c1·x + c2·x² in the part-load ratio
    /// x (§A.4.6: 742.8U² + 1,844.6U + 538.7 for an 8 MW chiller at 85 °F outside, 45 °F water).
    pub chiller_poly_kw: [f64; 3],
    pub chiller_ref_rated_kw: f64,
    pub chiller_ref_outside_f: f64,
    pub chiller_ref_water_f: f64,
    /// Ours: evaporator and condenser approach, °F, in the Carnot-lift scaling. 16 °F makes the
    /// 45 °F vs 55 °F difference at peak 488 kW ("nearly 500kW", §A.4.6).
    pub chiller_approach_f: f64,
    /// Ours: the lift never drops below this, °F (keeps the COP finite at cold outside air).
    pub chiller_min_lift_f: f64,
    /// Ours: the range of chilled-water temperature the optimal-cooling controller may choose.
    pub chilled_water_range_f: (f64, f64),
}

impl Default for CoolingParams {
    fn default() -> Self {
        Self {
            crah_effectiveness: 0.5,
            crah_max_flow_cfm: 6900.0,
            crah_fan_kw: 3.0,
            crah_idle_kw: 0.1,
            inlet_max_f: 77.0,
            static_chilled_water_f: 45.0,
            static_supply_air_f: 65.0,
            chiller_poly_kw: [538.7, 1844.6, 742.8],
            chiller_ref_rated_kw: 8000.0,
            chiller_ref_outside_f: 85.0,
            chiller_ref_water_f: 45.0,
            chiller_approach_f: 16.0,
            chiller_min_lift_f: 10.0,
            chilled_water_range_f: (40.0, 65.0),
        }
    }
}

/// The cooling plant's operating point.
#[derive(Clone, Debug, Serialize)]
pub struct CoolingSettings {
    pub supply_air_f: f64,
    pub chilled_water_f: f64,
    /// CRAH volume flow as a fraction of maximum (f in A.8, A.9).
    pub crah_flow_fraction: f64,
    pub server_inlet_f: f64,
}

/// CRAH and chiller power for one operating point.
#[derive(Clone, Debug, Serialize)]
pub struct CoolingPower {
    pub crah_kw: f64,
    pub chiller_kw: f64,
    pub settings: CoolingSettings,
}

fn crah_max_mass_flow_kg_s(p: &CoolingParams) -> f64 {
    p.crah_max_flow_cfm * M3S_PER_CFM * AIR_DENSITY
}

/// Heat one CRAH removes at full flow under the static set points of `scenario`, kW. From (A.7)
/// and (A.8) with the CRAH inlet at κT_ah + (1 − κ)T_ac:
/// q(1 − Eκf^0.7) = Eκ f^1.7 ṁ_max C_p (T_ac − T_wc).
pub fn crah_capacity_full_flow_kw(p: &CoolingParams, scenario: &Scenario) -> f64 {
    let ek = p.crah_effectiveness * scenario.containment;
    let dt_k = (p.static_supply_air_f - p.static_chilled_water_f) * K_PER_F;
    ek * crah_max_mass_flow_kg_s(p) * CP_AIR * dt_k / (1.0 - ek)
}

/// The CRAH flow fraction that removes `heat_kw` per unit at set points `supply_f`/`water_f`.
fn crah_flow_for(p: &CoolingParams, kappa: f64, heat_kw: f64, supply_f: f64, water_f: f64) -> f64 {
    let ek = p.crah_effectiveness * kappa;
    let m_cp = crah_max_mass_flow_kg_s(p) * CP_AIR;
    let dt_k = (supply_f - water_f) * K_PER_F;
    let excess = |f: f64| ek * f.powf(1.7) * m_cp * dt_k + ek * f.powf(0.7) * heat_kw - heat_kw;
    if heat_kw <= 0.0 {
        return 0.0;
    }
    // The design point sits exactly at full flow: allow round-off there.
    if dt_k <= 0.0 || excess(1.0) < -1e-9 * heat_kw {
        return f64::INFINITY;
    }
    // `excess` grows with f: bisect (60 halvings ≈ 1e-18 resolution).
    let (mut lo, mut hi) = (0.0, 1.0);
    for _ in 0..60 {
        let mid = 0.5 * (lo + hi);
        if excess(mid) < 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi
}

/// Server inlet temperature: κT_ac + (1 − κ)T_ah, with T_ah − T_ac = q / (κ ṁ C_p) from (A.7).
fn server_inlet_f(p: &CoolingParams, kappa: f64, heat_kw: f64, supply_f: f64, flow: f64) -> f64 {
    if flow <= 0.0 {
        return supply_f;
    }
    let rise_k = heat_kw / (kappa * flow * crah_max_mass_flow_kg_s(p) * CP_AIR);
    supply_f + (1.0 - kappa) * rise_k / K_PER_F
}

/// (A.9): one CRAH's power at flow fraction `flow`.
pub fn crah_power_kw(p: &CoolingParams, flow: f64) -> f64 {
    p.crah_idle_kw + p.crah_fan_kw * flow.powi(3)
}

/// Carnot coefficient of performance with `approach` °F on both heat exchangers.
fn carnot_cop(p: &CoolingParams, outside_f: f64, water_f: f64) -> f64 {
    let evap_f = water_f - p.chiller_approach_f;
    let cond_f = outside_f + p.chiller_approach_f;
    let lift_f = (cond_f - evap_f).max(p.chiller_min_lift_f);
    (evap_f + RANKINE_OFFSET) / lift_f
}

/// Chiller power, kW, removing `heat_kw` with a plant rated `rated_kw` (heat at U = 1).
/// The §A.4.6 polynomial is in U for a plant at ℓ = 0, where heat rises linearly from
/// `idle_heat_fraction` of rated at U = 0 (idle power conditioning, misc, CRAH idle) to rated at
/// U = 1; we invert that line to read a U off the heat, so the chiller responds to heat (other
/// ℓ and idle power change the heat, not the curve). Then scale by plant size and by the Carnot
/// COP relative to the reference conditions.
pub fn chiller_power_kw(
    p: &CoolingParams,
    rated_kw: f64,
    idle_heat_fraction: f64,
    heat_kw: f64,
    outside_f: f64,
    water_f: f64,
) -> f64 {
    let x = (heat_kw / rated_kw - idle_heat_fraction) / (1.0 - idle_heat_fraction);
    let [c0, c1, c2] = p.chiller_poly_kw;
    // Below the idle heat the curve is extrapolated; never below zero.
    let reference = (c0 + c1 * x + c2 * x * x).max(0.0);
    let cop_ref = carnot_cop(p, p.chiller_ref_outside_f, p.chiller_ref_water_f);
    reference * (rated_kw / p.chiller_ref_rated_kw) * cop_ref / carnot_cop(p, outside_f, water_f)
}

/// CRAH and chiller power for `room_heat_kw` in `facility` under `scenario`'s cooling policy.
pub fn cooling_power(
    p: &CoolingParams,
    facility: &Facility,
    scenario: &Scenario,
    room_heat_kw: f64,
) -> Result<CoolingPower> {
    if facility.crah_units.is_nan() || facility.crah_units <= 0.0 {
        return Err(invalid("CRAH units", facility.crah_units, "must be positive"));
    }
    let per_unit = room_heat_kw / facility.crah_units;
    let kappa = scenario.containment;
    let at = |supply_f: f64, water_f: f64, flow: f64| {
        let crah_kw = facility.crah_units * crah_power_kw(p, flow);
        let chiller_heat = room_heat_kw + crah_kw;
        let chiller_kw = chiller_power_kw(
            p,
            facility.chiller_rated_kw,
            facility.chiller_idle_heat_fraction,
            chiller_heat,
            scenario.outside_f,
            water_f,
        );
        let server_inlet_f = server_inlet_f(p, kappa, per_unit, supply_f, flow);
        let settings = CoolingSettings {
            supply_air_f: supply_f,
            chilled_water_f: water_f,
            crah_flow_fraction: flow,
            server_inlet_f,
        };
        CoolingPower { crah_kw, chiller_kw, settings }
    };
    if !scenario.optimal_cooling {
        let (supply, water) = (p.static_supply_air_f, p.static_chilled_water_f);
        let flow = crah_flow_for(p, kappa, per_unit, supply, water);
        if !flow.is_finite() {
            let what = format!("{}: static {supply} °F air, {water} °F water", scenario.name);
            return Err(Error::CoolingInfeasible { heat_kw: room_heat_kw, what });
        }
        return Ok(at(supply, water, flow));
    }
    optimal_cooling(p, kappa, per_unit, &at).ok_or_else(|| Error::CoolingInfeasible {
        heat_kw: room_heat_kw,
        what: format!("{}: no CRAH flow meets the inlet limit", scenario.name),
    })
}

/// "An optimizer with global knowledge ... chooses the highest T_wc that still allows CRAHs to
/// meet the maximum allowable server inlet temperature" (§A.4.8). For each CRAH flow on a 1%
/// grid, supply air is raised to the inlet limit and T_wc to the highest (A.8) allows; we keep
/// the flow with the least CRAH + chiller power (chiller power alone would pin fans at 100%).
fn optimal_cooling(
    p: &CoolingParams,
    kappa: f64,
    per_unit_kw: f64,
    at: &dyn Fn(f64, f64, f64) -> CoolingPower,
) -> Option<CoolingPower> {
    let ek = p.crah_effectiveness * kappa;
    let m_cp = crah_max_mass_flow_kg_s(p) * CP_AIR;
    let (water_min, water_max) = p.chilled_water_range_f;
    let mut best: Option<CoolingPower> = None;
    for step in 1..=FLOW_STEPS {
        let flow = f64::from(step) / f64::from(FLOW_STEPS);
        let rise_f = per_unit_kw / (flow * m_cp) / K_PER_F; // CRAH inlet − supply, °F
        let supply_max = p.inlet_max_f - (1.0 - kappa) / kappa * rise_f;
        // (A.8) solved for T_wc: T_wc = T_inlet,CRAH − q / (Eκ ṁ C_p f^0.7).
        let exchange_f = per_unit_kw / (ek * flow * m_cp * flow.powf(0.7)) / K_PER_F;
        let water = (supply_max + rise_f - exchange_f).min(water_max);
        if water < water_min {
            continue;
        }
        let supply = water + exchange_f - rise_f;
        let candidate = at(supply, water, flow);
        let better = best
            .as_ref()
            .is_none_or(|b| candidate.crah_kw + candidate.chiller_kw < b.crah_kw + b.chiller_kw);
        if better {
            best = Some(candidate);
        }
    }
    best
}
