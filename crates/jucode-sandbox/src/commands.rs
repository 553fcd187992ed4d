//! Command rules: which shell commands an agent may run outside the sandbox without asking
//! (`allow`), which always go to a person (`ask`), and which never run (`forbid`).
//!
//! Matching is on whole words of the command as the shell would split it (quotes removed), so
//! `git push` matches `git push origin` and `'git' "push"` but not `git pushx`. A compound
//! command is split at `;`, `&&`, `||`, `|`, `&`, newlines and parentheses, and the text of
//! `$(…)` and backquotes is looked at too: `forbid` and `ask` apply when any part matches.
//! Leading environment assignments (`A=1 git push`) and a few wrappers (`env`, `command`,
//! `exec`, `nohup`, `time`, `sudo`, `!`, `{`, shell keywords) are skipped before matching, and
//! a first word given as a path (`/usr/bin/git`) is matched by its file name. `allow` is
//! stricter: it lets a command run only when the command is one plain command (no separators,
//! substitutions, expansions, redirections, assignments, wrappers or path), since anything more
//! could run something the rule never named.

/// What a rule does with a command it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RuleAction {
    Allow,
    Ask,
    Forbid,
}

impl RuleAction {
    /// Parses the wire names `allow`, `ask`, `forbid`.
    pub fn parse(name: &str) -> Option<RuleAction> {
        match name {
            "allow" => Some(RuleAction::Allow),
            "ask" => Some(RuleAction::Ask),
            "forbid" => Some(RuleAction::Forbid),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            RuleAction::Allow => "allow",
            RuleAction::Ask => "ask",
            RuleAction::Forbid => "forbid",
        }
    }
}

/// One of an agent's `command_rules`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandRule {
    words: Vec<String>,
    action: RuleAction,
}

impl CommandRule {
    /// A rule for `prefix` (split on whitespace); `None` when it has no words, since an empty
    /// prefix would match every command.
    pub fn new(prefix: &str, action: RuleAction) -> Option<CommandRule> {
        let words: Vec<String> = prefix.split_whitespace().map(str::to_string).collect();
        (!words.is_empty()).then_some(CommandRule { words, action })
    }

    /// The prefix, its words joined by single spaces.
    pub fn prefix(&self) -> String {
        self.words.join(" ")
    }

    pub fn action(&self) -> RuleAction {
        self.action
    }
}

/// What the rules say about one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub action: RuleAction,
    /// The prefix of the rule that decided.
    pub prefix: String,
}

/// Decides `command` by `rules`: `None` when no rule decides (the approval mode then does).
/// A `forbid` among the matches wins; otherwise the longest matching prefix decides, `ask`
/// over `allow` at equal length and across the parts of a compound command.
pub fn decide(rules: &[CommandRule], command: &str) -> Option<Verdict> {
    let parsed = parse(command);
    let mut plain = parsed.plain && parsed.segments.len() == 1;
    let mut forbid: Option<&CommandRule> = None;
    let mut ask: Option<&CommandRule> = None;
    let mut allow: Option<&CommandRule> = None;
    for segment in &parsed.segments {
        let (words, skipped) = command_words(segment);
        if skipped {
            plain = false;
        }
        let Some(first) = words.first() else {
            continue;
        };
        if first.contains('/') {
            plain = false;
        }
        let matching = rules.iter().filter(|r| matches(&r.words, &words));
        let mut best: Option<&CommandRule> = None;
        for rule in matching {
            if rule.action == RuleAction::Forbid {
                forbid = Some(longer(forbid, rule));
            }
            best = Some(longer(best, rule));
        }
        match best.map(|r| r.action) {
            Some(RuleAction::Ask) => ask = best.map(|r| longer(ask, r)),
            Some(RuleAction::Allow) => allow = best,
            _ => {}
        }
    }
    let verdict = |rule: &CommandRule| Verdict {
        action: rule.action,
        prefix: rule.prefix(),
    };
    if let Some(rule) = forbid {
        return Some(verdict(rule));
    }
    if let Some(rule) = ask {
        return Some(verdict(rule));
    }
    allow.filter(|_| plain).map(verdict)
}

/// The longer of two rules; at equal length `ask` over `allow`, else the one kept first.
fn longer<'a>(kept: Option<&'a CommandRule>, rule: &'a CommandRule) -> &'a CommandRule {
    match kept {
        None => rule,
        Some(k) if rule.words.len() > k.words.len() => rule,
        Some(k) if rule.words.len() == k.words.len() && rank(rule) > rank(k) => rule,
        Some(k) => k,
    }
}

fn rank(rule: &CommandRule) -> u8 {
    match rule.action {
        RuleAction::Allow => 0,
        RuleAction::Ask => 1,
        RuleAction::Forbid => 2,
    }
}

/// Whether `prefix` is the start of `words`, the first word compared by file name.
fn matches(prefix: &[String], words: &[String]) -> bool {
    if prefix.len() > words.len() {
        return false;
    }
    prefix.iter().zip(words).enumerate().all(|(i, (p, w))| {
        if i == 0 {
            p == w || w.rsplit('/').next() == Some(p.as_str())
        } else {
            p == w
        }
    })
}

/// Words that run the command after them: skipped before matching.
const WRAPPERS: [&str; 17] = [
    "{", "!", "if", "then", "elif", "else", "do", "while", "until", "time", "exec", "command",
    "builtin", "nohup", "env", "sudo", "xargs",
];

/// A segment's words from the command name on, and whether assignments or wrappers were
/// skipped to get there.
fn command_words(segment: &[String]) -> (Vec<String>, bool) {
    let start = segment
        .iter()
        .position(|w| !is_assignment(w) && !WRAPPERS.contains(&w.as_str()))
        .unwrap_or(segment.len());
    (segment[start..].to_vec(), start > 0)
}

/// `NAME=value` with a shell variable name.
fn is_assignment(word: &str) -> bool {
    let Some((name, _)) = word.split_once('=') else {
        return false;
    };
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A command split the way the shell splits it, as far as matching needs.
#[derive(Debug, Default)]
struct Parsed {
    /// The simple commands, each as its words with quotes removed.
    segments: Vec<Vec<String>>,
    /// No separator, substitution, expansion, redirection, comment or unclosed quote.
    plain: bool,
}

/// How deep `$(…)` inside `$(…)` is followed.
const MAX_DEPTH: usize = 8;

fn parse(command: &str) -> Parsed {
    let mut parsed = Parsed {
        segments: Vec::new(),
        plain: true,
    };
    parse_into(command, &mut parsed, 0);
    parsed.segments.retain(|s| !s.is_empty());
    parsed
}

fn parse_into(text: &str, out: &mut Parsed, depth: usize) {
    if depth >= MAX_DEPTH {
        flat(text, out);
        return;
    }
    let chars: Vec<char> = text.chars().collect();
    let mut segment: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut i = 0;
    let end_word = |word: &mut String, in_word: &mut bool, segment: &mut Vec<String>| {
        if *in_word {
            segment.push(std::mem::take(word));
            *in_word = false;
        }
    };
    while i < chars.len() {
        let c = chars[i];
        match c {
            ' ' | '\t' => end_word(&mut word, &mut in_word, &mut segment),
            '\n' | ';' | '&' | '|' | '(' | ')' => {
                end_word(&mut word, &mut in_word, &mut segment);
                out.segments.push(std::mem::take(&mut segment));
                out.plain = false;
            }
            '<' | '>' => {
                // Process substitution `<(…)` runs a command; a plain redirection writes.
                end_word(&mut word, &mut in_word, &mut segment);
                out.plain = false;
                if chars.get(i + 1) == Some(&'(') {
                    let (inner, next) = balanced(&chars, i + 2);
                    parse_into(&inner, out, depth + 1);
                    i = next;
                    continue;
                }
            }
            '#' if !in_word => {
                out.plain = false;
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
                continue;
            }
            '\\' => {
                in_word = true;
                match chars.get(i + 1) {
                    Some('\n') => {}
                    Some(next) => word.push(*next),
                    None => {}
                }
                i += 2;
                continue;
            }
            '\'' => {
                in_word = true;
                let close = chars[i + 1..].iter().position(|c| *c == '\'');
                match close {
                    Some(n) => {
                        word.extend(&chars[i + 1..i + 1 + n]);
                        i += n + 2;
                    }
                    None => {
                        out.plain = false;
                        word.extend(&chars[i + 1..]);
                        i = chars.len();
                    }
                }
                continue;
            }
            '"' => {
                in_word = true;
                i = double_quoted(&chars, i + 1, &mut word, out, depth);
                continue;
            }
            '$' | '`' => {
                in_word = true;
                i = expansion(&chars, i, &mut word, out, depth);
                continue;
            }
            _ => {
                in_word = true;
                word.push(c);
            }
        }
        i += 1;
    }
    end_word(&mut word, &mut in_word, &mut segment);
    out.segments.push(segment);
}

/// Too deep to follow: every quote, bracket, `$` and backquote splits, so the words of the
/// innermost commands are still seen (more parts than the shell would make, never fewer).
fn flat(text: &str, out: &mut Parsed) {
    out.plain = false;
    let mut segment = Vec::new();
    let mut word = String::new();
    for c in text.chars() {
        if c == ' ' || c == '\t' || "\n;&|()<>$`\"'{}\\".contains(c) {
            if !word.is_empty() {
                segment.push(std::mem::take(&mut word));
            }
            if c != ' ' && c != '\t' {
                out.segments.push(std::mem::take(&mut segment));
            }
        } else {
            word.push(c);
        }
    }
    if !word.is_empty() {
        segment.push(word);
    }
    out.segments.push(segment);
}

/// Reads a double-quoted string from `i` (after the quote) into `word`; returns the index
/// after the closing quote.
fn double_quoted(
    chars: &[char],
    mut i: usize,
    word: &mut String,
    out: &mut Parsed,
    depth: usize,
) -> usize {
    while i < chars.len() {
        match chars[i] {
            '"' => return i + 1,
            '\\' => {
                match chars.get(i + 1) {
                    Some(c @ ('"' | '\\' | '$' | '`')) => word.push(*c),
                    Some('\n') => {}
                    Some(c) => {
                        word.push('\\');
                        word.push(*c);
                    }
                    None => {}
                }
                i += 2;
            }
            '$' | '`' => i = expansion(chars, i, word, out, depth),
            c => {
                word.push(c);
                i += 1;
            }
        }
    }
    out.plain = false;
    i
}

/// A `$…` or backquote at `i`: the command inside a substitution is parsed as segments of its
/// own; the text stays in `word` as written. Returns the index after it.
fn expansion(chars: &[char], i: usize, word: &mut String, out: &mut Parsed, depth: usize) -> usize {
    out.plain = false;
    if chars[i] == '`' {
        let close = chars[i + 1..].iter().position(|c| *c == '`');
        let end = close.map_or(chars.len(), |n| i + 1 + n);
        let inner: String = chars[i + 1..end].iter().collect();
        parse_into(&inner, out, depth + 1);
        word.push('`');
        word.push_str(&inner);
        word.push('`');
        return (end + 1).min(chars.len());
    }
    if chars.get(i + 1) == Some(&'(') {
        let (inner, next) = balanced(chars, i + 2);
        parse_into(&inner, out, depth + 1);
        word.push_str("$(");
        word.push_str(&inner);
        word.push(')');
        return next;
    }
    word.push('$');
    i + 1
}

/// The text from `start` up to the `)` that closes an already opened `(`, and the index after
/// that `)` (the end when there is none).
fn balanced(chars: &[char], start: usize) -> (String, usize) {
    let mut level = 1usize;
    let mut i = start;
    while i < chars.len() {
        match chars[i] {
            '(' => level += 1,
            ')' => {
                level -= 1;
                if level == 0 {
                    return (chars[start..i].iter().collect(), i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
    (chars[start..].iter().collect(), chars.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, &str)]) -> Vec<CommandRule> {
        list.iter()
            .map(|(p, a)| CommandRule::new(p, RuleAction::parse(a).unwrap()).unwrap())
            .collect()
    }

    fn said(rules: &[CommandRule], command: &str) -> Option<(&'static str, String)> {
        decide(rules, command).map(|v| (v.action.as_str(), v.prefix))
    }

    #[test]
    fn the_table() {
        let rules = rules(&[
            ("git add", "allow"),
            ("git commit", "allow"),
            ("git push", "ask"),
            ("git push --force", "forbid"),
            ("rm -rf /", "forbid"),
            ("git", "ask"),
            ("cargo", "allow"),
            ("cargo publish", "ask"),
            ("npm publish", "forbid"),
        ]);
        let table: &[(&str, Option<(&str, &str)>)] = &[
            // Whole words, longest prefix.
            ("git push origin main", Some(("ask", "git push"))),
            ("git pushx", Some(("ask", "git"))),
            ("git commit -m 'a message'", Some(("allow", "git commit"))),
            ("git add -A", Some(("allow", "git add"))),
            ("git status", Some(("ask", "git"))),
            ("gitk", None),
            ("cargo build --release", Some(("allow", "cargo"))),
            ("cargo publish --dry-run", Some(("ask", "cargo publish"))),
            ("make deploy", None),
            ("", None),
            ("   ", None),
            // Forbid wins over a longer or any other match.
            (
                "git push --force origin",
                Some(("forbid", "git push --force")),
            ),
            ("rm -rf / --no-preserve-root", Some(("forbid", "rm -rf /"))),
            ("rm -rf /tmp/x", None),
            // Whitespace and quotes do not matter.
            ("  git\tpush   origin ", Some(("ask", "git push"))),
            ("'git' \"push\" origin", Some(("ask", "git push"))),
            ("g\\it push", Some(("ask", "git push"))),
            // Assignments and wrappers are seen through; an allow then no longer applies.
            ("GIT_DIR=/x git push", Some(("ask", "git push"))),
            (
                "A=1 B=2 git push --force",
                Some(("forbid", "git push --force")),
            ),
            ("A=1 git commit -m x", None),
            ("env npm publish", Some(("forbid", "npm publish"))),
            ("sudo rm -rf /", Some(("forbid", "rm -rf /"))),
            ("/usr/bin/git push", Some(("ask", "git push"))),
            ("/usr/bin/git commit -m x", None),
            // Every part of a compound command counts; an allow needs one plain command.
            ("git add . && git push", Some(("ask", "git push"))),
            ("git add . ; npm publish", Some(("forbid", "npm publish"))),
            ("git add . && rm -rf ~", None),
            (
                "echo x | git push --force",
                Some(("forbid", "git push --force")),
            ),
            ("(cd sub && git push)", Some(("ask", "git push"))),
            ("git commit -m x > /etc/passwd", None),
            ("git commit -m \"$(cat msg)\"", None),
            ("echo $(npm publish)", Some(("forbid", "npm publish"))),
            ("echo `npm publish`", Some(("forbid", "npm publish"))),
            ("echo \"$(rm -rf /)\"", Some(("forbid", "rm -rf /"))),
            ("diff <(npm publish) x", Some(("forbid", "npm publish"))),
            ("git commit -m $MSG", None),
            ("git commit -m 'x' # note", None),
            ("git commit -m 'unclosed", None),
            ("git add .\nnpm publish", Some(("forbid", "npm publish"))),
            // Separators inside quotes are text.
            (
                "git commit -m 'a; npm publish'",
                Some(("allow", "git commit")),
            ),
            (
                "git commit -m \"a && b | c\"",
                Some(("allow", "git commit")),
            ),
        ];
        for (command, want) in table {
            let want = want.map(|(a, p)| (a, p.to_string()));
            assert_eq!(said(&rules, command), want, "{command:?}");
        }
    }

    #[test]
    fn ask_beats_allow_at_equal_length_and_across_parts() {
        let r = rules(&[("make", "allow"), ("make", "ask")]);
        assert_eq!(said(&r, "make all"), Some(("ask", "make".into())));
        let r = rules(&[("make", "allow"), ("make test", "allow"), ("ls", "ask")]);
        assert_eq!(said(&r, "make test"), Some(("allow", "make test".into())));
        assert_eq!(said(&r, "make test; ls"), Some(("ask", "ls".into())));
    }

    #[test]
    fn rules_need_words_and_known_actions() {
        assert!(CommandRule::new("  ", RuleAction::Allow).is_none());
        assert_eq!(
            CommandRule::new(" git   push ", RuleAction::Ask)
                .unwrap()
                .prefix(),
            "git push"
        );
        assert_eq!(RuleAction::parse("deny"), None);
        for a in [RuleAction::Allow, RuleAction::Ask, RuleAction::Forbid] {
            assert_eq!(RuleAction::parse(a.as_str()), Some(a));
        }
        assert_eq!(decide(&[], "git push"), None);
    }

    #[test]
    fn deep_or_unbalanced_substitutions_stay_closed() {
        let r = rules(&[("npm publish", "forbid"), ("echo", "allow")]);
        let deep = format!("echo {}npm publish{}", "$(".repeat(20), ")".repeat(20));
        assert_eq!(said(&r, &deep).map(|v| v.0), Some("forbid"));
        assert_eq!(said(&r, "echo $(npm publish").map(|v| v.0), Some("forbid"));
        assert_eq!(said(&r, "echo hi"), Some(("allow", "echo".into())));
    }
}
