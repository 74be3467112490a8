//! Names from a session (image paths, symbol names, source paths, command lines) as the text
//! views print them: a control character could otherwise move the cursor, retitle the
//! terminal or hide text (an ESC or C1 CSI/OSC sequence in a symbol name of a profiled
//! program, a newline forging a line). [`escape`] writes every C0 control (U+0000–U+001F,
//! newline and tab included) and DEL as `\xNN` and every C1 control (U+0080–U+009F) as
//! `\u{NN}`; an OSC or CSI sequence is then inert text (its ESC or U+009B/U+009D escaped).
//! A backslash is not escaped (a name with `\x1b` in it reads the same as an escaped ESC; no
//! terminal acts on either). JSON and pprof output keep names as they are; folded stacks and
//! flame graphs escape them the same way, after replacing what breaks their format
//! ([`super::flame::sanitize`]).

use std::borrow::Cow;
use std::fmt;

/// Whether the text views escape `c`: C0, DEL, C1.
fn is_control(c: char) -> bool {
    matches!(c, '\0'..='\x1f' | '\x7f'..='\u{9f}')
}

/// `s` with its control characters escaped (see the module docs); borrowed when it has none.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_control) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '\0'..='\x1f' | '\x7f' => out.push_str(&format!("\\x{:02x}", u32::from(c))),
            '\u{80}'..='\u{9f}' => out.push_str(&format!("\\u{{{:02x}}}", u32::from(c))),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// A name displayed [`escape`]d, padded as the format asks (`{:<28}`).
#[derive(Debug, Clone, Copy)]
pub struct Printable<'a>(pub &'a str);

impl fmt::Display for Printable<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(&escape(self.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_nothing_else() {
        assert!(matches!(
            escape("main /usr/lib/libc.so.6 ä€"),
            Cow::Borrowed(_)
        ));
        assert_eq!(escape("a\x1b]0;pwned\x07b"), "a\\x1b]0;pwned\\x07b");
        assert_eq!(escape("x\ny\tz\r\0\x7f"), "x\\x0ay\\x09z\\x0d\\x00\\x7f");
        assert_eq!(
            escape("\u{9b}31m\u{85}\u{80}\u{a0}"),
            "\\u{9b}31m\\u{85}\\u{80}\u{a0}"
        );
        assert_eq!(format!("[{:<8}]", Printable("a\x1b")), "[a\\x1b   ]");
    }
}
