//! The name an uploaded file keeps: the client's name made safe to put in a path and to show.
//!
//! Path separators, control characters, the characters Windows forbids in names and the
//! Unicode direction overrides become `_`; surrounding whitespace, leading dots (no hidden
//! files, no `..`) and trailing dots go; a name longer than [`UPLOAD_KEPT_NAME_BYTES`] is cut
//! before its extension, which is kept.

use jucode_protocol::daemon::limits::UPLOAD_KEPT_NAME_BYTES;

/// The longest extension kept whole when a name is cut (the dot included).
const EXTENSION_BYTES: usize = 16;

fn replaced(c: char) -> bool {
    c.is_control()
        || matches!(c, '/' | '\\' | ':' | '*' | '?' | '"' | '<' | '>' | '|')
        || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{200e}' | '\u{200f}')
}

/// The cleaned name, or why there is none.
pub(crate) fn clean_name(name: &str) -> Result<String, &'static str> {
    if name.trim().is_empty() {
        return Err("name is empty");
    }
    let swapped: String = name
        .chars()
        .map(|c| if replaced(c) { '_' } else { c })
        .collect();
    let trimmed = swapped
        .trim()
        .trim_start_matches('.')
        .trim_end_matches(['.', ' '])
        .trim();
    if trimmed
        .chars()
        .all(|c| c == '_' || c == '.' || c.is_whitespace())
    {
        return Err(
            "name has nothing left once separators, control characters and dots are removed",
        );
    }
    Ok(shorten(trimmed))
}

/// Cuts `name` to the kept length at a character boundary, keeping a short extension.
fn shorten(name: &str) -> String {
    if name.len() <= UPLOAD_KEPT_NAME_BYTES {
        return name.to_string();
    }
    let ext = name
        .rfind('.')
        .map(|i| &name[i..])
        .filter(|e| e.len() <= EXTENSION_BYTES && e[1..].chars().all(char::is_alphanumeric))
        .unwrap_or("");
    let room = UPLOAD_KEPT_NAME_BYTES - ext.len();
    let stem = &name[..name.len() - ext.len()];
    let mut cut = room.min(stem.len());
    while !stem.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}{ext}", &stem[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_what_could_leave_the_folder_or_hide() {
        assert_eq!(clean_name("photo.jpg").unwrap(), "photo.jpg");
        assert_eq!(
            clean_name("  Screen Shot 1.png ").unwrap(),
            "Screen Shot 1.png"
        );
        assert_eq!(clean_name("../../etc/passwd").unwrap(), "_.._etc_passwd");
        assert_eq!(clean_name("a/b\\c.txt").unwrap(), "a_b_c.txt");
        assert_eq!(clean_name(".bashrc").unwrap(), "bashrc");
        assert_eq!(clean_name("x\0y\n.png").unwrap(), "x_y_.png");
        assert_eq!(clean_name("C:evil?.txt").unwrap(), "C_evil_.txt");
        assert_eq!(clean_name("gpj.\u{202e}exe").unwrap(), "gpj._exe");
        assert_eq!(clean_name("trail. . ").unwrap(), "trail");
        assert_eq!(clean_name("照片.jpg").unwrap(), "照片.jpg");
        for bad in ["", "   ", "..", ".", "/", "../", "\u{0}", "/../..", "_ . _"] {
            assert!(clean_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_long_name_is_cut_before_its_extension() {
        let long = format!("{}.png", "a".repeat(300));
        let kept = clean_name(&long).unwrap();
        assert_eq!(kept.len(), UPLOAD_KEPT_NAME_BYTES);
        assert!(kept.ends_with("aaa.png"), "{kept}");
        let wide = format!("{}.jpeg", "照".repeat(100));
        let kept = clean_name(&wide).unwrap();
        assert!(
            kept.len() <= UPLOAD_KEPT_NAME_BYTES && kept.ends_with("照.jpeg"),
            "{kept}"
        );
        let odd = format!("{}.{}", "b".repeat(200), "x".repeat(40));
        assert_eq!(clean_name(&odd).unwrap().len(), UPLOAD_KEPT_NAME_BYTES);
    }
}
