//! The notification triggers of a dispatch's changes.

use jucode_protocol::daemon::{DispatchInfo, DispatchStatus, DispatchTask, TaskStatus};

use super::notes;

fn dispatch(status: DispatchStatus, tasks: &[TaskStatus]) -> DispatchInfo {
    DispatchInfo {
        id: "s1".into(),
        text: "fix the login page\nand more".into(),
        plan: true,
        mode: "auto".into(),
        status,
        tasks: tasks
            .iter()
            .enumerate()
            .map(|(i, status)| DispatchTask {
                id: i as u64 + 1,
                title: format!("task {}", i + 1),
                project: "/p".into(),
                session: Some(format!("t{}", i + 1)),
                engine: "jucode".into(),
                status: *status,
                reply: String::new(),
            })
            .collect(),
        summary: String::new(),
        created_at: 0,
        updated_at: 0,
    }
}

#[test]
fn a_plan_waiting_notifies_once() {
    let planning = dispatch(DispatchStatus::Planning, &[]);
    let awaiting = dispatch(DispatchStatus::Awaiting, &[TaskStatus::Planned]);
    let got = notes(Some(&planning), &awaiting);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].title, "Dispatch plan waiting: fix the login page");
    assert_eq!(got[0].body, "1. task 1");
    assert_eq!(got[0].session.as_deref(), Some("s1"));
    assert!(notes(Some(&awaiting), &awaiting).is_empty());
}

#[test]
fn a_task_waiting_for_approval_notifies_with_its_session() {
    let before = dispatch(
        DispatchStatus::Running,
        &[TaskStatus::Running, TaskStatus::Running],
    );
    let after = dispatch(
        DispatchStatus::Running,
        &[TaskStatus::Running, TaskStatus::Waiting],
    );
    let got = notes(Some(&before), &after);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].title, "Approval needed: task 2");
    assert_eq!(got[0].session.as_deref(), Some("t2"));
    assert!(notes(Some(&after), &after).is_empty());
}

#[test]
fn a_dispatch_done_notifies_with_its_summary() {
    let before = dispatch(DispatchStatus::Running, &[TaskStatus::Done]);
    let mut after = dispatch(DispatchStatus::Done, &[TaskStatus::Done]);
    after.summary = "all fixed".into();
    let got = notes(Some(&before), &after);
    assert_eq!(got.len(), 1);
    assert_eq!(got[0].title, "Dispatch done: fix the login page");
    assert_eq!(got[0].body, "all fixed");
    assert!(notes(Some(&after), &after).is_empty());
    // Cancelled and failed dispatches notify nothing.
    let cancelled = dispatch(DispatchStatus::Cancelled, &[TaskStatus::Planned]);
    assert!(notes(Some(&before), &cancelled).is_empty());
}

#[test]
fn a_dispatch_comes_back_from_its_log_as_it_was_saved() {
    let home = tempfile::tempdir().unwrap();
    let state = jucode_store::StateDir::open(home.path()).unwrap();
    let mut info = dispatch(
        DispatchStatus::Running,
        &[TaskStatus::Sent, TaskStatus::Done],
    );
    info.summary = "so far".into();
    let saved = super::Stored {
        info,
        requirement: Some("R-1".into()),
        texts: vec!["first".into(), "second".into()],
        summarizing: false,
    };
    {
        let mut store = super::store::Store::open(&state).unwrap();
        store.save(saved.clone()).unwrap();
        let mut later = saved.clone();
        later.info.tasks[0].status = TaskStatus::Running;
        store.save(later).unwrap();
    }
    let store = super::store::Store::open(&state).unwrap();
    assert_eq!(store.list.len(), 1);
    let back = store.get("s1").unwrap();
    assert_eq!(back.info.tasks[0].status, TaskStatus::Running);
    assert_eq!(back.texts, saved.texts);
    assert_eq!(back.requirement, saved.requirement);
    assert_eq!(super::tool::task_text(back, 2), "second");
}
