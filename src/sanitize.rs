//! The one sanitizer: how text that gdrdoctor did not write itself is shown to a person.
//!
//! Strings read off a node or a capture (a hostname, a firmware version, a NIC's name), sent by
//! the other node of a two-node test (its host name, a `refused` reason, a failure message), or
//! read from a report file or a log reach terminals, scripts' comments, spreadsheets and
//! pictures. None of them may clear the screen, retitle the window, hide a line with a carriage
//! return, start a new line that forges `READY`, or reorder what is shown with a bidirectional
//! override (CVE-2021-42574, "Trojan Source"). Every such string goes through [`text`] (or
//! [`cut`], [`quoted`]) before it is shown; the formats' own encoders (XML, Prometheus, CSV,
//! SVG) then escape what their syntax needs, on top.
//!
//! What is escaped, as Rust writes it (`\n`, `\u{1b}`, `\u{202e}`):
//! - control characters (C0, DEL, C1: `char::is_control`), the line feed among them;
//! - the line and paragraph separators U+2028 and U+2029;
//! - the invisible formatting characters that change how text around them reads: zero-width
//!   space, joiners and marks (U+200B to U+200F, U+2060 to U+2064), the Arabic letter mark
//!   (U+061C), the bidirectional embeddings, overrides and isolates (U+202A to U+202E, U+2066
//!   to U+2069), the byte-order mark (U+FEFF), the interlinear annotation controls (U+FFF9 to
//!   U+FFFB) and the tag characters (U+E0000 to U+E007F);
//! - the noncharacters U+FFFE and U+FFFF (XML 1.0 allows them nowhere, not even as a reference).

use std::borrow::Cow;

/// How many characters [`quoted`] shows of a value before it cuts it.
pub const QUOTED_CHARS: usize = 120;

/// Whether `c` is shown escaped.
fn hostile(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061c}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{2069}'
                | '\u{feff}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{fffe}'
                | '\u{ffff}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

/// `s` with every hostile character escaped (`a\u{1b}[2Jb`, `evil\nREADY`); borrowed when there
/// is none.
pub fn text(s: &str) -> Cow<'_, str> {
    if !s.chars().any(hostile) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        push(&mut out, c, false);
    }
    Cow::Owned(out)
}

/// [`text`] of at most `max` characters as shown (escapes count by what they print): a longer
/// one ends in `…`, so that a name cannot stretch a line, a layout or a log.
pub fn cut(s: &str, max: usize) -> String {
    cut_cow(s, max).into_owned()
}

/// [`cut`], borrowed when `s` is shown as it is: printable ASCII that fits, nothing in it
/// escaped or cut. Nearly every name in a log is; `nccl explain` looks up several a line
/// (issue 43).
pub fn cut_cow(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max && s.bytes().all(|b| matches!(b, b' '..=b'~')) {
        return Cow::Borrowed(s);
    }
    Cow::Owned(shown(s, max, false))
}

/// `s` kept to at most `max` bytes (at a character boundary), its end saying how much was cut:
/// text from a capture or the environment (a kernel log record of a megabyte, an NCCL_IB_HCA of
/// 900 KB) reaches a report, a log and a terminal bounded (issue 41). Escaping stays the
/// renderer's.
pub fn bound(s: &mut String, max: usize) {
    if s.len() <= max {
        return;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let cut = s.len() - end;
    s.truncate(end);
    s.push_str(&format!("… ({cut} bytes more, cut)"));
}

/// A raw value in a message: in double quotes, hostile characters, quotes and backslashes
/// escaped, at most [`QUOTED_CHARS`] characters of it (`"a\nb"`, `"xxxx…"`).
pub fn quoted(s: &str) -> String {
    quoted_max(s, QUOTED_CHARS)
}

/// [`quoted`] with another length: error lines that quote their input quote a short prefix.
pub fn quoted_max(s: &str, max: usize) -> String {
    format!("\"{}\"", shown(s, max, true))
}

fn push(out: &mut String, c: char, quoting: bool) {
    if hostile(c) {
        out.extend(c.escape_default());
    } else if quoting && (c == '"' || c == '\\') {
        out.push('\\');
        out.push(c);
    } else {
        out.push(c);
    }
}

fn shown(s: &str, max: usize, quoting: bool) -> String {
    let mut out = String::new();
    let mut count = 0;
    let mut piece = String::new();
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        piece.clear();
        push(&mut piece, c, quoting);
        let n = piece.chars().count();
        // The last piece may take the room the ellipsis would need; any other keeps it free.
        let room = if chars.peek().is_none() {
            max
        } else {
            max.saturating_sub(1)
        };
        if count + n > room {
            out.push('…');
            return out;
        }
        out.push_str(&piece);
        count += n;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bound_cuts_at_a_character_and_says_so() {
        let mut s = "é".repeat(10);
        bound(&mut s, 5);
        assert_eq!(s, "éé… (16 bytes more, cut)");
        let mut t = "short".to_owned();
        bound(&mut t, 5);
        assert_eq!(t, "short");
    }

    #[test]
    fn hostile_characters_are_escaped_and_the_rest_kept() {
        assert_eq!(text("mlx5_0"), "mlx5_0");
        assert!(matches!(text("node-ä 🚀"), Cow::Borrowed(_)));
        assert_eq!(text("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        // A host name that forges a verdict line of its own.
        assert_eq!(
            text("evil\n\u{1b}[32mREADY\r"),
            "evil\\n\\u{1b}[32mREADY\\r"
        );
        assert_eq!(text("x\u{9b}31m"), "x\\u{9b}31m");
        assert_eq!(text("abc\u{202e}fed"), "abc\\u{202e}fed");
        assert_eq!(text("a\u{2028}b\u{2029}"), "a\\u{2028}b\\u{2029}");
        assert_eq!(text("z\u{200b}w\u{feff}"), "z\\u{200b}w\\u{feff}");
        assert_eq!(text("x\u{ffff}\u{e0041}"), "x\\u{ffff}\\u{e0041}");
        // A backslash alone is not hostile: only quoting escapes it.
        assert_eq!(text("a\\b"), "a\\b");
    }

    #[test]
    fn plain_ascii_is_cut_as_any_text() {
        let text = "a ~b}c\"d";
        for len in 0..=text.len() {
            for max in 0..=text.len() + 1 {
                let s = &text[..len];
                assert_eq!(cut(s, max), shown(s, max, false), "{s:?} {max}");
            }
        }
    }

    #[test]
    fn cut_counts_what_is_shown() {
        assert_eq!(cut("mlx5_0", 10), "mlx5_0");
        assert_eq!(cut("abcdefghij", 10), "abcdefghij");
        assert_eq!(cut("abcdefghijk", 10), "abcdefghi…");
        assert_eq!(cut("a\u{1b}[2Jb", 20), "a\\u{1b}[2Jb");
        // An escape is never cut in half.
        assert_eq!(cut("ab\u{1b}cdef", 6), "ab…");
        assert_eq!(cut("", 0), "");
        assert_eq!(cut("x", 0), "…");
    }

    #[test]
    fn quoted_escapes_quotes_and_cuts() {
        assert_eq!(quoted("a\nb"), "\"a\\nb\"");
        assert_eq!(quoted("say \"hi\" \\o/"), "\"say \\\"hi\\\" \\\\o/\"");
        let long = quoted(&"x".repeat(500));
        assert!(long.ends_with("…\""), "{long}");
        assert_eq!(long.chars().count(), QUOTED_CHARS + 2);
        assert_eq!(quoted_max("n[0-99999]", 4), "\"n[0…\"");
    }
}
