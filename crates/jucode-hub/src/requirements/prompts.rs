//! The words the start gate sends a session at each step, in Chinese (the default) and
//! English. Our own wording: the spec names only what each step asks for.

use jucode_protocol::daemon::Progress;

use super::{RequirementError, Stored};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lang {
    Zh,
    En,
}

impl Lang {
    pub(crate) fn parse(value: Option<&str>) -> Result<Lang, RequirementError> {
        match value {
            None | Some("zh") => Ok(Lang::Zh),
            Some("en") => Ok(Lang::En),
            Some(_) => Err(RequirementError::Lang),
        }
    }
}

/// The first message: the requirement, where earlier sessions left it, the user's words,
/// and the ask to explain it without changing anything.
pub(crate) fn understand(lang: Lang, r: &Stored, added: Option<&str>) -> String {
    let mut out = match lang {
        Lang::Zh => format!("需求 {}：\n{}", r.id, r.text.trim()),
        Lang::En => format!("Requirement {}:\n{}", r.id, r.text.trim()),
    };
    if let Some(progress) = progress_block(lang, &r.progress) {
        out.push_str("\n\n");
        out.push_str(&progress);
    }
    push_added(&mut out, lang, added);
    out.push_str("\n\n");
    out.push_str(match lang {
        Lang::Zh => {
            "在做任何改动之前，请只说明你对这个需求的理解：目标、范围（做什么、不做什么）、你的假设、\
             还不清楚的问题，以及它是否值得做。不要修改文件，也不要运行会改变任何东西的命令。\
             说明之后就停下，等我确认。"
        }
        Lang::En => {
            "Before you change anything, reply only with your understanding of this requirement: \
             the goal, what is in and out of scope, your assumptions, the open questions, and \
             whether it is worth doing. Do not edit files or run anything that changes state. \
             Then stop and wait for my confirmation."
        }
    });
    out
}

/// After the understanding is confirmed, with `plan`: a plan, still read-only.
pub(crate) fn plan(lang: Lang, added: Option<&str>) -> String {
    let mut out = match lang {
        Lang::Zh => {
            "你的理解已确认。现在请写出实施计划：步骤、预计要改动的文件，以及你会怎样验证结果。\
                     仍然不要做任何改动；写完计划就停下，等我确认。"
                .to_string()
        }
        Lang::En => {
            "Your understanding is confirmed. Now write an implementation plan: the steps, \
                     the files you expect to change, and how you will check the result. Still \
                     change nothing; stop after the plan and wait for my confirmation."
                .to_string()
        }
    };
    push_added(&mut out, lang, added);
    out
}

/// The last confirmation: the session may now do the work.
pub(crate) fn go(lang: Lang, planned: bool, added: Option<&str>) -> String {
    let mut out = match (lang, planned) {
        (Lang::Zh, true) => "计划已确认，请按计划开始实施。",
        (Lang::Zh, false) => "你的理解已确认，请开始完成这项工作。",
        (Lang::En, true) => "The plan is confirmed. Go ahead and carry it out.",
        (Lang::En, false) => "Your understanding is confirmed. Go ahead and do the work.",
    }
    .to_string();
    push_added(&mut out, lang, added);
    out
}

fn push_added(out: &mut String, lang: Lang, added: Option<&str>) {
    let Some(added) = added.map(str::trim).filter(|a| !a.is_empty()) else {
        return;
    };
    out.push_str(match lang {
        Lang::Zh => "\n\n补充：",
        Lang::En => "\n\nAlso: ",
    });
    out.push_str(added);
}

/// What earlier sessions recorded, so a new one starts where the last one stopped; `None`
/// when nothing was recorded.
fn progress_block(lang: Lang, p: &Progress) -> Option<String> {
    let (head, names) = match lang {
        Lang::Zh => (
            "此前的进展：",
            [
                "目标",
                "已决定",
                "已完成",
                "进行中",
                "受阻",
                "下一步",
                "文件",
                "备注",
            ],
        ),
        Lang::En => (
            "Where the work stands:",
            [
                "Goal", "Decided", "Done", "Doing", "Blocked", "Next", "Files", "Note",
            ],
        ),
    };
    let one = |s: &String| vec![s.clone()];
    let fields = [
        one(&p.goal),
        p.decided.clone(),
        p.done.clone(),
        p.doing.clone(),
        p.blocked.clone(),
        p.next.clone(),
        p.files.clone(),
        one(&p.note),
    ];
    let lines: Vec<String> = names
        .iter()
        .zip(fields)
        .filter_map(|(name, items)| {
            let items: Vec<&str> = items
                .iter()
                .map(|s| s.trim())
                .filter(|s| !s.is_empty())
                .collect();
            (!items.is_empty()).then(|| format!("- {name}: {}", items.join("; ")))
        })
        .collect();
    (!lines.is_empty()).then(|| format!("{head}\n{}", lines.join("\n")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use jucode_protocol::daemon::RequirementState;

    fn stored(progress: Progress) -> Stored {
        Stored {
            id: "R-3".into(),
            text: "  Add dark mode  ".into(),
            title: String::new(),
            title_auto: false,
            images: Vec::new(),
            project: None,
            projects: None,
            state: RequirementState::Open,
            sessions: Vec::new(),
            progress,
            progress_at: 0,
            source: "desktop".into(),
            source_session: None,
            gate: None,
            proposal: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    #[test]
    fn languages_are_zh_by_default_and_en_on_request() {
        assert_eq!(Lang::parse(None).ok(), Some(Lang::Zh));
        assert_eq!(Lang::parse(Some("en")).ok(), Some(Lang::En));
        assert!(Lang::parse(Some("fr")).is_err());
    }

    #[test]
    fn the_first_message_carries_the_words_progress_and_additions() {
        let p = Progress {
            done: vec!["the toggle".into(), " ".into()],
            next: vec!["colours".into()],
            ..Progress::default()
        };
        let text = understand(Lang::En, &stored(p), Some(" only the settings page "));
        assert!(text.starts_with("Requirement R-3:\nAdd dark mode\n\nWhere the work stands:"));
        assert!(text.contains("- Done: the toggle\n- Next: colours"));
        assert!(text.contains("Also: only the settings page\n\n"));
        assert!(text.ends_with("wait for my confirmation."));
        let zh = understand(Lang::Zh, &stored(Progress::default()), None);
        assert!(zh.starts_with("需求 R-3：\nAdd dark mode\n\n在做任何改动之前"));
        assert!(!zh.contains("此前的进展"));
    }

    #[test]
    fn plan_and_go_add_the_users_words() {
        assert!(plan(Lang::En, Some("keep it small")).ends_with("\n\nAlso: keep it small"));
        assert!(go(Lang::En, true, None).starts_with("The plan is confirmed"));
        assert!(go(Lang::Zh, false, Some("")).ends_with("请开始完成这项工作。"));
    }
}
