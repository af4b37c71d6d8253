//! `--format junit`: JUnit XML, one testcase per finding, one testsuite per check, for CI
//! systems and test dashboards.
//!
//! Mapping: fail -> `<failure>`; warn -> passes with the message in `<system-out>` (a
//! `<failure>` under --strict); unknown -> `<skipped>` (could not tell; an `<error>` under
//! --strict); skip -> `<skipped>`; a check without findings (skipped or not run) is one
//! testcase of its own. So the XML has failures or errors exactly when the node is not ready.

use super::Report;
use crate::checks::CheckResult;
use crate::model::{Finding, Status};
use std::fmt::Write as _;

pub fn render(report: &Report) -> String {
    let strict = report.verdict.strict;
    let host = report.node.hostname.as_deref().unwrap_or("");
    let mut suites = String::new();
    let (mut tests, mut failures, mut errors, mut skipped) = (0, 0, 0, 0);
    for c in &report.checks {
        let cases = cases(c, strict);
        let n = |k: Kind| cases.iter().filter(|(kind, _)| *kind == k).count();
        let (t, f, e, s) = (
            cases.len(),
            n(Kind::Failure),
            n(Kind::Error),
            n(Kind::Skipped),
        );
        tests += t;
        failures += f;
        errors += e;
        skipped += s;
        let _ = writeln!(
            suites,
            "  <testsuite name=\"gdrdoctor.{id}\" tests=\"{t}\" failures=\"{f}\" errors=\"{e}\" skipped=\"{s}\" hostname=\"{host}\">",
            id = c.id,
            host = attr(host),
        );
        let _ = writeln!(
            suites,
            "    <properties>\n      <property name=\"title\" value=\"{}\"/>\n      <property name=\"status\" value=\"{}\"/>\n    </properties>",
            attr(c.title),
            c.status
        );
        for (_, xml) in cases {
            suites.push_str(&xml);
        }
        suites.push_str("  </testsuite>\n");
    }
    // A run that verified nothing is not ready although no finding failed: one error says so,
    // so that the XML has failures or errors exactly when the node is not ready.
    if report.verdict.state == super::State::NothingVerified {
        tests += 1;
        errors += 1;
        let _ = write!(
            suites,
            "  <testsuite name=\"gdrdoctor.verdict\" tests=\"1\" failures=\"0\" errors=\"1\" skipped=\"0\" hostname=\"{host}\">\n    <testcase classname=\"gdrdoctor.verdict\" name=\"{code}\">\n      {body}\n    </testcase>\n  </testsuite>\n",
            host = attr(host),
            code = super::NOTHING_VERIFIED,
            body = element(
                "error",
                super::NOTHING_VERIFIED,
                &report.verdict.summary,
                ""
            ),
        );
    }
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"gdrdoctor\" tests=\"{tests}\" failures=\"{failures}\" errors=\"{errors}\" skipped=\"{skipped}\">"
    );
    out.push_str(&suites);
    out.push_str("</testsuites>\n");
    out
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Pass,
    Failure,
    Error,
    Skipped,
}

fn cases(c: &CheckResult, strict: bool) -> Vec<(Kind, String)> {
    if c.findings.is_empty() {
        let why = c.skipped.as_deref().unwrap_or("no findings");
        let (kind, body) = match c.status {
            Status::Skip => (
                Kind::Skipped,
                format!("<skipped message=\"{}\"/>", attr(why)),
            ),
            // A check with no findings and another status would be a bug; show it, never hide it.
            s => (
                Kind::Error,
                format!("<error message=\"{} without findings\"/>", s),
            ),
        };
        return vec![(
            kind,
            format!(
                "    <testcase classname=\"gdrdoctor.{id}\" name=\"{id}\">\n      {body}\n    </testcase>\n",
                id = c.id
            ),
        )];
    }
    c.findings.iter().map(|f| case(c, f, strict)).collect()
}

fn case(c: &CheckResult, f: &Finding, strict: bool) -> (Kind, String) {
    let name = if f.subject.is_empty() {
        f.code.to_owned()
    } else {
        format!("{}: {}", f.code, f.subject)
    };
    let mut detail = String::new();
    for e in &f.evidence {
        let _ = writeln!(detail, "{} = {}", e.path, e.value);
    }
    if let Some(fix) = &f.fix {
        let _ = writeln!(detail, "fix: {}", fix.summary);
        for cmd in &fix.commands {
            let _ = writeln!(detail, "  [{:?}] {}", cmd.class, cmd.run);
        }
    }
    let message = format!("{}: {}", f.status, f.message);
    let (kind, body) = match f.status {
        Status::Fail => (Kind::Failure, element("failure", f.code, &message, &detail)),
        Status::Warn if strict => (Kind::Failure, element("failure", f.code, &message, &detail)),
        Status::Unknown if strict => (Kind::Error, element("error", f.code, &message, &detail)),
        Status::Unknown | Status::Skip => (
            Kind::Skipped,
            format!("<skipped message=\"{}\"/>", attr(&message)),
        ),
        Status::Warn | Status::Pass => (
            Kind::Pass,
            format!(
                "<system-out>{}</system-out>",
                text(&format!("{message}\n{detail}"))
            ),
        ),
    };
    (
        kind,
        format!(
            "    <testcase classname=\"gdrdoctor.{}\" name=\"{}\">\n      {body}\n    </testcase>\n",
            c.id,
            attr(&name)
        ),
    )
}

fn element(tag: &str, code: &str, message: &str, detail: &str) -> String {
    format!(
        "<{tag} type=\"{}\" message=\"{}\">{}</{tag}>",
        attr(code),
        attr(message),
        text(detail)
    )
}

/// Element text: each line through the one sanitizer (crate::sanitize: a value read off a
/// hostile capture can neither make the file unparseable, since XML 1.0 cannot carry most C0
/// controls even as references, nor reach a CI page raw), its line breaks kept, then XML's
/// own escapes.
fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for (i, line) in s.split('\n').enumerate() {
        if i > 0 {
            out.push('\n');
        }
        for ch in crate::sanitize::text(line).chars() {
            match ch {
                '&' => out.push_str("&amp;"),
                '<' => out.push_str("&lt;"),
                '>' => out.push_str("&gt;"),
                c => out.push(c),
            }
        }
    }
    out
}

/// An attribute value: one line, through the one sanitizer, then XML's escapes.
pub(crate) fn attr(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in crate::sanitize::text(s).chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn hostile_text_stays_well_formed() {
        assert_eq!(
            super::attr("a\"<b>&\u{1}\n"),
            "a&quot;&lt;b&gt;&amp;\\u{1}\\n"
        );
        assert_eq!(super::text("x]]>\u{7}\ny"), "x]]&gt;\\u{7}\ny");
    }
}
