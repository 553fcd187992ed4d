//! File size: no Rust source file over [`LIMIT`] lines of code. Counted are the lines before
//! the file's inline test module (a top-level `#[cfg(test)]` item that is a `mod … {`), minus
//! blank lines and lines that are only a comment (`//`, `///`, `//!`, or inside `/* … */`).

/// The most lines of code a file may have.
pub const LIMIT: usize = 1200;

/// Lines of code in a Rust source, counted as the module documentation says.
pub fn code_lines(source: &str) -> usize {
    let lines: Vec<&str> = source.lines().collect();
    let mut count = 0;
    let mut in_block_comment = false;
    for (i, line) in lines.iter().enumerate() {
        if *line == "#[cfg(test)]" && opens_inline_module(&lines[i + 1..]) {
            break;
        }
        let t = line.trim();
        if in_block_comment {
            in_block_comment = !t.contains("*/");
            continue;
        }
        if t.starts_with("/*") {
            in_block_comment = !t.contains("*/");
            continue;
        }
        if t.is_empty() || t.starts_with("//") {
            continue;
        }
        count += 1;
    }
    count
}

/// Whether the item after a `#[cfg(test)]` (further attributes and blank lines skipped) is a
/// module with its body in this file.
fn opens_inline_module(rest: &[&str]) -> bool {
    rest.iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty() && !l.starts_with("#[") && !l.starts_with("//"))
        .is_some_and(|l| {
            let item = l
                .strip_prefix("pub(crate) ")
                .or_else(|| l.strip_prefix("pub "))
                .unwrap_or(l);
            item.starts_with("mod ") && l.ends_with('{')
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn comments_blanks_and_the_inline_tests_do_not_count() {
        let source = "//! doc\n\nuse a;\n/// item\nfn f() {\n    // why\n    g();\n}\n/* block\n   still */\n\
                      #[cfg(test)]\nconst ONLY_IN_TESTS: u8 = 1;\n#[cfg(test)]\n#[allow(x)]\nmod tests {\n    fn t() {}\n}\n";
        // `use a;`, `fn f() {`, `g();`, `}` and the cfg(test) const with its attribute.
        assert_eq!(code_lines(source), 6);
        // A test module in its own file ends nothing.
        assert_eq!(code_lines("#[cfg(test)]\nmod tests;\nfn f() {}\n"), 3);
    }

    #[test]
    fn an_oversized_file_is_over_the_limit_and_its_tests_are_free() {
        let body = "let x = 1;\n".repeat(LIMIT + 1);
        assert!(code_lines(&body) > LIMIT);
        let tests = format!("fn f() {{}}\n#[cfg(test)]\nmod tests {{\n{body}}}\n");
        assert_eq!(code_lines(&tests), 1);
    }
}
