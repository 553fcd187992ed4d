//! System prompts: coding sessions (with project instructions), chats, and the engine's own
//! short requests (titles, safety checks, compaction).

use std::path::{Path, PathBuf};

use jucode_sandbox::{Mode, Policy};

/// Project instruction files read from cwd, in order.
const INSTRUCTION_FILES: [&str; 2] = ["AGENTS.md", "CLAUDE.md"];
/// How much of one instruction file goes into the prompt.
const MAX_INSTRUCTIONS: usize = 64 * 1024;

/// The prompt of a coding session in `cwd`, under `policy` (its mode, writable and read-only
/// directories, network).
pub fn coding(cwd: &Path, policy: &Policy) -> String {
    let list = |dirs: &[PathBuf]| {
        dirs.iter()
            .map(|d| d.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut prompt = format!(
        "You are jucode, a coding agent working in {cwd}. You help the user with software tasks by reading and changing files and running commands through your tools.\n\n\
         Tools: bash runs shell commands in {cwd}; read reads files; write creates or overwrites files; str_replace edits a file by replacing one exact piece of text; ripgrep searches contents or lists files and honours .gitignore.\n\
         Paths are relative to {cwd}; you may only touch files inside it{extra}.\n",
        cwd = cwd.display(),
        extra = if policy.writable.is_empty() {
            String::new()
        } else {
            format!(" and these directories: {}", list(&policy.writable))
        }
    );
    if !policy.readable.is_empty() {
        prompt.push_str(&format!(
            "You may read, but never write, these directories: {}.\n",
            list(&policy.readable)
        ));
    }
    match policy.mode {
        Mode::FullAccess => {}
        Mode::WorkspaceWrite => prompt.push_str(
            "Commands run in a sandbox: the workspace is writable, .git, .jucode and .agents are read-only, credentials are hidden. When a command must leave the sandbox (for example git commit, or writing elsewhere), call bash with escalate: true and a justification; it then waits for approval.\n",
        ),
        Mode::ReadOnly => prompt.push_str(
            "This session is read-only: commands run in a sandbox where nothing is writable but a private /tmp, credentials are hidden, and the file tools cannot write. When a command must change something, call bash with escalate: true and a justification; it then waits for approval.\n",
        ),
    }
    if policy.mode != Mode::FullAccess && !policy.network {
        prompt.push_str("Sandboxed commands have no network access.\n");
    }
    prompt.push_str(
        "Some calls need the user's approval; if one is denied, do not retry it, and ask how to go on. If a call is submitted for confirmation, continue with what does not depend on it.\n\
         Be concise. Read before you edit, keep changes small and focused, and say what you changed.\n",
    );
    for name in INSTRUCTION_FILES {
        if let Some(text) = read_instructions(&cwd.join(name)) {
            prompt.push_str(&format!("\n# Project instructions ({name})\n\n{text}\n"));
        }
    }
    prompt
}

fn read_instructions(path: &Path) -> Option<String> {
    let meta = std::fs::metadata(path).ok()?;
    if !meta.is_file() {
        return None;
    }
    let text = std::fs::read_to_string(path).ok()?;
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    Some(if text.len() > MAX_INSTRUCTIONS {
        let mut end = MAX_INSTRUCTIONS;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}\n(cut: the file is longer)", &text[..end])
    } else {
        text.to_string()
    })
}

/// The prompt of a chat session: conversation and research, no project.
pub fn chat(cwd: &Path) -> String {
    format!(
        "You are jucode in a chat: a thoughtful assistant for conversation and research. Answer questions clearly, reason carefully, say when you are unsure, and cite what you rely on. \
         You have tools: bash (for calculations, fetching with command-line tools where the network allows, and quick experiments), read, write, str_replace and ripgrep, working in {} for notes and scratch files. There is no project here.\n",
        cwd.display()
    )
}

/// Asks for a session title.
pub const TITLE_SYSTEM: &str = "You write a title for a coding session. Answer with the title only: at most six words, no quotes, no final period.";

pub fn title_request(
    project: &str,
    current: Option<&str>,
    first: &str,
    latest: &str,
    reply: &str,
) -> String {
    format!(
        "Project: {project}\nCurrent title: {}\nFirst request: {}\nLatest request: {}\nStart of the latest reply: {}\n\nWrite the title.",
        current.unwrap_or("(none)"),
        crate::model::clip(first, 500),
        crate::model::clip(latest, 500),
        crate::model::clip(reply, 300),
    )
}

/// Cleans a model's title answer: first line, no quotes or trailing period, at most 60 chars.
pub fn clean_title(raw: &str) -> Option<String> {
    let line = raw.lines().map(str::trim).find(|l| !l.is_empty())?;
    let line = line.strip_prefix("Title:").unwrap_or(line).trim();
    let line = line
        .trim_matches(|c| c == '"' || c == '\'' || c == '`' || c == '*')
        .trim_end_matches('.')
        .trim();
    if line.is_empty() {
        return None;
    }
    Some(line.chars().take(60).collect())
}

/// Asks whether a call may run without a person.
pub const SAFETY_SYSTEM: &str = "You are the safety check of a coding agent. You see one tool call the agent wants to make. Answer ALLOW if it is clearly safe and in scope for a coding task (no data loss outside the project, no credentials, no publishing or deploying, no destructive git operations), otherwise ASK so a person decides. Answer with the single word ALLOW or ASK.";

pub fn safety_request(cwd: &Path, tool: &str, arguments: &str, summary: &str) -> String {
    format!(
        "Working directory: {}\nTool: {tool}\nSummary: {summary}\nArguments: {}\n\nALLOW or ASK?",
        cwd.display(),
        crate::model::clip(arguments, 4000)
    )
}

/// Reads a safety answer; anything but a clear ALLOW asks.
pub fn safety_allows(answer: &str) -> bool {
    let word = answer
        .trim()
        .trim_matches(|c: char| !c.is_ascii_alphabetic())
        .to_ascii_uppercase();
    word == "ALLOW"
}

/// Asks for a summary that replaces the conversation.
pub const COMPACT_SYSTEM: &str = "You compact a coding session's conversation so it can go on with less context. Write a summary that keeps everything needed to continue: the user's goals and constraints, decisions made, files read and changed (with paths), commands run and their important results, open problems and the next steps. Write it as notes, not as a conversation.";

pub const COMPACT_REQUEST: &str =
    "Summarise the conversation so far as described. Answer with the summary only.";

/// How the summary starts the compacted conversation.
pub fn summary_message(summary: &str) -> String {
    format!("Summary of the conversation so far (it was compacted):\n\n{summary}")
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn project_instructions_join_coding_prompts_only() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("AGENTS.md"), "Use tabs.").unwrap();
        let mut policy = Policy {
            mode: Mode::WorkspaceWrite,
            cwd: dir.path().to_path_buf(),
            writable: vec![],
            readable: vec![],
            network: true,
            user_home: dir.path().to_path_buf(),
            jucode_home: dir.path().join(".jucode"),
        };
        let prompt = coding(dir.path(), &policy);
        assert!(prompt.contains("# Project instructions (AGENTS.md)\n\nUse tabs."));
        assert!(prompt.contains("escalate: true"));
        assert!(!prompt.contains("read-only:") && !prompt.contains("no network"));
        policy.mode = Mode::ReadOnly;
        policy.network = false;
        policy.readable = vec![PathBuf::from("/docs")];
        let prompt = coding(dir.path(), &policy);
        assert!(prompt.contains("This session is read-only"), "{prompt}");
        assert!(prompt.contains("no network access"), "{prompt}");
        assert!(
            prompt.contains("never write, these directories: /docs"),
            "{prompt}"
        );
        assert!(!chat(dir.path()).contains("Use tabs."));
    }

    #[test]
    fn titles_and_safety_answers_are_cleaned() {
        assert_eq!(
            clean_title("\n\"Fix the login bug.\"\nmore").as_deref(),
            Some("Fix the login bug")
        );
        assert_eq!(
            clean_title("Title: Add tests").as_deref(),
            Some("Add tests")
        );
        assert_eq!(clean_title("  \n"), None);
        assert!(safety_allows("ALLOW"));
        assert!(safety_allows(" allow.\n"));
        assert!(!safety_allows("ASK"));
        assert!(!safety_allows("ALLOW? no, ASK"));
    }
}
