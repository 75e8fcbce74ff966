//! The report's pages ([`super`]): `index.html`, `report.md` and `verdicts.json` from a built
//! [`Report`], with the summary, the rules every verdict follows and the tallies. Apart from
//! the building (data, verdicts, figures) because a page changes for readers, the building for
//! the rules.

use super::*;

pub(super) fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

pub(super) fn verdict_class(v: &Verdict) -> &'static str {
    match v {
        Verdict::Reproduced => "ok",
        Verdict::Differs => "differs",
        Verdict::Inconclusive(_) => "inconclusive",
        Verdict::NotRunnable(_) => "blocked",
        Verdict::NoData(_) => "nodata",
        Verdict::Quick(_) => "quick",
        Verdict::NotJudged(_) => "nodata",
    }
}

/// Verdict counts of one class of claims.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counts {
    pub agree: usize,
    pub differ: usize,
    pub inconclusive: usize,
    pub not_runnable: usize,
    pub no_data: usize,
    pub quick: usize,
    pub not_judged: usize,
}

impl Counts {
    fn add(&mut self, v: &Verdict) {
        match v {
            Verdict::Reproduced => self.agree += 1,
            Verdict::Differs => self.differ += 1,
            Verdict::Inconclusive(_) => self.inconclusive += 1,
            Verdict::NotRunnable(_) => self.not_runnable += 1,
            Verdict::NoData(_) => self.no_data += 1,
            Verdict::Quick(_) => self.quick += 1,
            Verdict::NotJudged(_) => self.not_judged += 1,
        }
    }

    pub fn total(&self) -> usize {
        self.agree
            + self.differ
            + self.inconclusive
            + self.not_runnable
            + self.no_data
            + self.quick
            + self.not_judged
    }
}

/// The verdict counts by class: only `paper.agree` is the number of reproductions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Tally {
    pub paper: Counts,
    pub our_tolerance: Counts,
    pub checks: Counts,
    /// Seeds' inputs and fitted constants: never judged, never counted as reproductions.
    pub inputs: Counts,
}

pub fn tally(report: &Report) -> Tally {
    let mut t = Tally::default();
    for c in report.specs.iter().flat_map(|s| &s.claims) {
        match c.class {
            Class::Paper => t.paper.add(&c.verdict),
            Class::OurTolerance => t.our_tolerance.add(&c.verdict),
            Class::Check => t.checks.add(&c.verdict),
            Class::Input => t.inputs.add(&c.verdict),
        }
    }
    t
}

// Figures are shown at their native width (at most 1,120 px: two panels a row), never shrunk:
// a shrunk figure's 12 px text is unreadable. A narrower window scrolls the figure instead.
pub(super) const STYLE: &str =
    "body{font-family:sans-serif;max-width:1180px;margin:2em auto;padding:0 1em;\
color:#222}h2{border-top:1px solid #ccc;padding-top:1em}table{border-collapse:collapse;\
margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}\
.ok{background:#d9f2d9}.differs{background:#fde0c8}.blocked{background:#e8e8e8}\
.nodata{background:#f4f4f4;color:#666}.inconclusive{background:#e6e6fa}\
.quick{background:#fff3b0}.status{font-style:italic}\
.fig{overflow-x:auto;margin:1em 0}.fig img{max-width:none;display:block}\
.src{color:#555;font-size:90%}.banner{border:2px solid #b00;background:#fff0f0;color:#900;\
padding:.6em 1em;font-weight:bold}.mark{color:#900;font-size:70%;font-weight:normal}\
footer{border-top:1px solid #ccc;margin-top:2em;padding-top:.5em;color:#444;font-size:90%}";

pub(super) fn counts_text(c: &Counts, agree: &str, differ: &str) -> String {
    let mut parts = vec![format!("{} {agree}", c.agree), format!("{} {differ}", c.differ)];
    parts.push(format!("{} inconclusive", c.inconclusive));
    if c.not_runnable > 0 {
        parts.push(format!("{} not yet runnable", c.not_runnable));
    }
    parts.push(format!("{} without data", c.no_data));
    if c.quick > 0 {
        parts.push(format!("{} judged on quick runs ({QUICK_VERDICT})", c.quick));
    }
    parts.join(", ")
}

/// The verdict counts in words: the paper's claims against the paper's numbers first (the
/// only ones that can be reproductions), then our tolerances and the implementation checks.
pub(super) fn summary(report: &Report) -> String {
    let t = tally(report);
    let quick = t.paper.quick + t.our_tolerance.quick + t.checks.quick;
    if quick > 0 {
        // A quick report should not open with "0 reproduced" either.
        let all = [t.paper, t.our_tolerance, t.checks];
        let sum = |f: fn(&Counts) -> usize| all.iter().map(f).sum::<usize>();
        let parts = [
            (quick, format!("judged on quick runs ({QUICK_VERDICT})")),
            (sum(|c| c.not_runnable), "not yet runnable".to_string()),
            (sum(|c| c.no_data), "without data".to_string()),
            (sum(|c| c.agree + c.differ + c.inconclusive), "judged on full runs".to_string()),
        ];
        let text: Vec<String> =
            parts.iter().filter(|(n, _)| *n > 0).map(|(n, w)| format!("{n} {w}")).collect();
        return format!("{}.", text.join(", "));
    }
    let p = &t.paper;
    let mut paper = vec![
        format!("{} reproduced", p.agree),
        format!("{} differ (each with its cause)", p.differ),
        format!("{} inconclusive", p.inconclusive),
    ];
    if p.not_runnable > 0 {
        paper.push(format!("{} not yet runnable", p.not_runnable));
    }
    paper.push(format!("{} without data", p.no_data));
    if p.quick > 0 {
        paper.push(format!("{} judged on quick runs ({QUICK_VERDICT})", p.quick));
    }
    format!(
        "Paper claims against the paper's bounds: {}. Apart, not counted as reproductions: {} \
         against our tolerance ({}); {} implementation checks ({}); {} inputs and fitted \
         constants (what we put in, never judged).",
        paper.join(", "),
        t.our_tolerance.total(),
        counts_text(&t.our_tolerance, "within", "outside"),
        t.checks.total(),
        counts_text(&t.checks, "pass", "fail"),
        t.inputs.total(),
    )
}

/// The rules every verdict follows, stated once at the top of the report.
pub const RULES: &[&str] = &[
    "A reproduction is a paper claim judged against the paper's own number; a claim whose \
     bound we chose (`bound = \"ours\"`) is listed under \"Our tolerance\" and a claim that \
     is not the paper's (`role = \"check\"`) under \"Implementation checks\"; neither counts \
     as a reproduction.",
    "The VM runs a configuration at two speeds about 2× apart from one process to the next: \
     every point's number is its fastest repetition (highest throughput, all metrics of that \
     run), in every spec; error bars and the repetitions column show the spread over all \
     repetitions.",
    "Inconclusive: the claim computed on each repetition alone agrees with the bound on some \
     repetitions and not on others, or a crossing lies outside the measured range where the \
     bound partly lies.",
    "Break-evens and thresholds by linear interpolation between measured points only: no \
     crossing within the measured range is never agreement.",
    "A break-even on a latency axis also shows that latency ÷ the time one thread spends on a \
     transaction of the latency-sensitive method at latency 0 (threads ÷ throughput), so \
     machines faster or slower than the paper's compare; the papers state break-evens in \
     absolute µs and print throughput only in figures, so theirs are not normalised.",
    "Aggregates show every group's value and its own verdict (✓ within, ✗ outside, ? \
     inconclusive); a claim about every workload or the worst case requires every group.",
    "Runs that hit a harness limit (the driver's pending-commit cap, pending_full_waits > 0; \
     a Pelley page flusher more than 10,000 pages behind its dirty-page budget) are flagged \
     and excluded from figures and verdicts.",
    "Runs that ended before the duration they asked for (a full region) are kept and listed \
     under \"ended early\" in their experiment's notes: their rates are per measured second, \
     their totals cover the measured time only.",
];

/// What the page says at the top of a report with quick runs in it.
pub(super) fn quick_banner(report: &Report) -> Option<String> {
    let quick: Vec<&str> =
        report.specs.iter().filter(|s| s.quick).map(|s| s.name.as_str()).collect();
    (!quick.is_empty()).then(|| {
        format!(
            "{QUICK_VERDICT} — run with --quick (short runs on a reduced grid, one \
             repetition): {}. Their figures and verdicts show that the pipeline works; they do \
             not reproduce the paper.",
            quick.join(", ")
        )
    })
}

/// The footer: what the runs were measured on and when the report was written.
pub fn footer_lines(report: &Report) -> Vec<String> {
    vec![
        format!("Runs: {}.", report.provenance.line()),
        format!("Report written {} UTC by nvmdb report.", report.written),
    ]
}

/// `index.html`.
pub fn html(report: &Report) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>nvmdb: the papers' figures\
         </title><style>{STYLE}</style></head><body><h1>nvmdb: the papers' figures</h1>"
    );
    if let Some(banner) = quick_banner(report) {
        let _ = write!(h, "<p class=\"banner\">{}</p>", escape(&banner));
    }
    let _ = write!(h, "<p>{}</p><ul>", escape(&summary(report)));
    for rule in RULES {
        let _ = write!(h, "<li>{}</li>", escape(rule));
    }
    h.push_str("</ul><table><tr><th>experiment</th><th>status</th><th>claims</th></tr>");
    for s in &report.specs {
        let mark = if s.quick {
            format!(" <span class=\"mark\">{QUICK_VERDICT}</span>")
        } else {
            String::new()
        };
        let _ = write!(
            h,
            "<tr><td><a href=\"#{}\">{}</a>{mark}</td><td>{}</td><td>{}</td></tr>",
            escape(&s.name),
            escape(&s.title),
            escape(&s.status),
            s.claims.len()
        );
    }
    h.push_str("</table>");
    for s in &report.specs {
        spec_html(&mut h, s);
    }
    h.push_str("<footer>");
    for line in footer_lines(report) {
        let _ = write!(h, "<p>{}</p>", escape(&line));
    }
    h.push_str("</footer></body></html>\n");
    h
}

pub(super) fn spec_html(h: &mut String, s: &SpecReport) {
    let mark = if s.quick {
        format!(" <span class=\"mark\">{QUICK_VERDICT}</span>")
    } else {
        String::new()
    };
    let _ = write!(
        h,
        "<h2 id=\"{}\">{}{mark}</h2><p class=\"src\">{} — spec <code>{}</code></p><p>{}</p>\
         <p class=\"status\">{}</p>",
        escape(&s.name),
        escape(&s.title),
        escape(&s.source),
        escape(&s.name),
        escape(&s.description),
        escape(&s.status)
    );
    if !s.needs.is_empty() && s.points.measured < s.points.total {
        let _ = write!(h, "<p>Needs: {}</p>", escape(&s.needs.join("; ")));
    }
    for (svg, png, (w, height)) in &s.figures {
        let _ = write!(
            h,
            "<div class=\"fig\"><img src=\"{svg}\" width=\"{w}\" height=\"{height}\" alt=\"{}\">\
             </div><p class=\"src\">{w}×{height} px: <a href=\"{svg}\">SVG</a> · \
             <a href=\"{png}\">PNG</a>. Black dashed lines and diamonds are the paper's \
             values, grey bands the intervals the claims accept.</p>",
            escape(&s.title)
        );
    }
    if !s.claims.is_empty() {
        h.push_str(
            "<table><tr><th>claim</th><th>kind</th><th>source</th><th>paper</th>\
             <th>accepted</th><th>measured</th><th>repetitions</th><th>verdict</th></tr>",
        );
        for c in &s.claims {
            let kind = SECTIONS.iter().find(|x| x.0 == c.class).map_or("", |x| x.1);
            let _ = write!(
                h,
                "<tr><td>{} <span class=\"src\">({})</span></td><td class=\"src\">{kind}</td>\
                 <td class=\"src\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
                 <td class=\"{}\">{}</td></tr>",
                escape(&c.text),
                escape(&c.id),
                escape(&c.source),
                escape(&c.paper_with_bound()),
                escape(&c.accepted),
                escape(&c.measured_text()),
                escape(&repetitions_cell(c)),
                verdict_class(&c.verdict),
                escape(&c.verdict_text())
            );
        }
        h.push_str("</table>");
    }
    for n in &s.notes {
        let _ = write!(h, "<p class=\"src\">Note: {}</p>", escape(n));
    }
}

pub(super) fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The report's three sections of claims, in order, with their headings.
pub const SECTIONS: [(Class, &str, &str); 4] = [
    (
        Class::Paper,
        "Paper claims",
        "The paper's claims against the paper's numbers: the only ones that can reproduce.",
    ),
    (
        Class::OurTolerance,
        "Our tolerance",
        "The paper's claims where the paper gives no number we can check directly: the \
         interval is ours (its reason beside the paper's words). Never counted as a \
         reproduction.",
    ),
    (
        Class::Check,
        "Implementation checks",
        "Not paper claims: our protocols against Pelley's, self-consistency checks.",
    ),
    (
        Class::Input,
        "Inputs and fitted constants",
        "What a seed's model takes from the paper (inputs) or was tuned to match (fitted \
         constants), beside the paper's number: never judged, never counted as reproduced.",
    ),
];

/// The cell of a claim's repetitions.
pub(super) fn repetitions_cell(c: &ClaimResult) -> String {
    c.repetitions.clone().unwrap_or_else(|| "–".into())
}

/// One table of claims of `specs` in `class`, under a heading of `level` (`##`); nothing for
/// an empty class other than the paper's, which lists the specs without claims by status.
fn class_table(m: &mut String, specs: &[&SpecReport], section: (Class, &str, &str), level: &str) {
    let (class, heading, what) = section;
    let any = specs.iter().flat_map(|s| &s.claims).any(|c| c.class == class);
    if !any && class != Class::Paper {
        return;
    }
    let _ = writeln!(m, "{level} {heading}\n\n{what}\n");
    m.push_str(
        "| experiment | claim | paper | accepted | measured | repetitions | verdict |\n\
         |---|---|---|---|---|---|---|\n",
    );
    for s in specs {
        if class == Class::Paper && s.claims.is_empty() {
            let (name, status) = (md_cell(&s.name), md_cell(&s.status));
            let _ = writeln!(m, "| {name} | – | – | – | – | – | {status} |");
        }
        for c in s.claims.iter().filter(|c| c.class == class) {
            let _ = writeln!(
                m,
                "| {} | {} | {} | {} | {} | {} | {} |",
                md_cell(&s.name),
                md_cell(&c.text),
                md_cell(&c.paper_with_bound()),
                md_cell(&c.accepted),
                md_cell(&c.measured_text()),
                md_cell(&repetitions_cell(c)),
                md_cell(&c.verdict_text())
            );
        }
    }
    m.push('\n');
}

/// A spec's part of the list of experiments, under its own heading (so that a link can name
/// it: `report.md#pelley-fig5`): source, status, figures (linked), notes.
fn experiment_item(m: &mut String, s: &SpecReport, level: &str) {
    let _ = writeln!(m, "{level} {}\n\n{}: {} ({})\n", s.name, s.title, s.status, s.source);
    if !s.figures.is_empty() {
        let links: Vec<String> = s
            .figures
            .iter()
            .map(|(svg, png, _)| {
                let stem = Path::new(svg).file_stem().map(|x| x.to_string_lossy().into_owned());
                format!("[{}]({svg}) ([PNG]({png}))", stem.unwrap_or_default())
            })
            .collect();
        let _ = writeln!(m, "Figures: {}\n", links.join(", "));
    }
    for n in &s.notes {
        let _ = writeln!(m, "- {n}");
    }
    if !s.notes.is_empty() {
        m.push('\n');
    }
}

/// The heading of a seed's section (`## Seed: persistency`, anchor `#seed-persistency`).
pub fn seed_heading(seed: &str) -> String {
    format!("Seed: {seed}")
}

/// `report.md`: the verdict tables, for terminals.
pub fn markdown(report: &Report) -> String {
    let mut m = String::from("# nvmdb: the papers' figures\n\n");
    if let Some(banner) = quick_banner(report) {
        let _ = writeln!(m, "**{banner}**\n");
    }
    let _ = writeln!(m, "{}\n", summary(report));
    for rule in RULES {
        let _ = writeln!(m, "- {rule}");
    }
    m.push('\n');
    let swept: Vec<&SpecReport> = report.specs.iter().filter(|s| s.seed.is_none()).collect();
    for section in SECTIONS {
        class_table(&mut m, &swept, section, "##");
    }
    m.push_str("## Experiments\n\n");
    for s in &swept {
        experiment_item(&mut m, s, "###");
    }
    let mut seeds: Vec<&str> = Vec::new();
    for s in report.specs.iter().filter_map(|s| s.seed.as_deref()) {
        if !seeds.contains(&s) {
            seeds.push(s);
        }
    }
    for seed in seeds {
        let specs: Vec<&SpecReport> =
            report.specs.iter().filter(|s| s.seed.as_deref() == Some(seed)).collect();
        let _ = writeln!(
            m,
            "## {}\n\nRun by its own command, not `nvmdb sweep`; every claim judged again \
             here from the numbers its command wrote (ours, the accepted interval, its role).\n",
            seed_heading(seed)
        );
        for s in &specs {
            experiment_item(&mut m, s, "###");
        }
        for section in SECTIONS {
            class_table(&mut m, &specs, section, "###");
        }
    }
    for line in footer_lines(report) {
        let _ = writeln!(m, "{line}  ");
    }
    m
}

/// Writes `index.html`, `report.md` and `verdicts.json` into the report directory.
pub fn write(report: &Report) -> Result<Vec<PathBuf>, ReportError> {
    let json = serde_json::to_string_pretty(report).map_err(|e| ReportError::Io {
        path: report.out.join("verdicts.json"),
        error: std::io::Error::other(e),
    })?;
    let files =
        [("index.html", html(report)), ("report.md", markdown(report)), ("verdicts.json", json)];
    let mut written = Vec::new();
    for (name, text) in files {
        let path = report.out.join(name);
        results::write_atomically(&path, text.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}
