//! The checks of what the client decided about what the agents left it: questions closed
//! without an answer and reopened, and the requirements the agents proposed, accepted or
//! declined.

use std::collections::HashMap;

use serde_json::Value;

use super::checks::{ids, list, shut_problem};
use super::model::{Model, ToolAcks};

/// The restarted daemon's `question_list` reply against the questions the client closed or
/// reopened (those it answered are `check_items`'; one it sent an answer for without the
/// reply may be closed as answered).
pub fn check_shut_questions(model: &Model, questions: &Value) -> Vec<String> {
    let open = ids(questions, "questions");
    // Each closed question's reason (`null` when it has none).
    let closed: HashMap<&str, &str> = list(questions, "closed")
        .iter()
        .filter_map(|q| {
            Some((
                q["id"].as_str()?,
                q["closed_reason"].as_str().unwrap_or("null"),
            ))
        })
        .collect();
    let mut problems = Vec::new();
    for (id, shut) in &model.questions_shut {
        if model.answers.contains_key(id) {
            continue;
        }
        let is_open = open.contains(id.as_str());
        let reason = closed.get(id.as_str()).copied();
        if reason == Some("answered") && model.answers_sent.contains(id) {
            continue;
        }
        if reason.is_none() && !is_open {
            problems.push(format!("question {id}, closed by the client, lost"));
        } else {
            problems.extend(shut_problem("question", id, *shut, is_open, reason));
        }
    }
    problems
}

/// The restarted daemon's `requirements` frame against the agents' proposals: every one a
/// tool returned is there, proposed, until the client decides it; accepted (acknowledged) it
/// is an idea, declined (acknowledged) it is gone for good; a decision sent without its
/// acknowledgement is either.
pub fn check_proposals(model: &Model, tools: &ToolAcks, requirements: &Value) -> Vec<String> {
    let states: HashMap<&str, &str> = list(requirements, "requirements")
        .iter()
        .filter_map(|r| Some((r["id"].as_str()?, r["state"].as_str().unwrap_or("?"))))
        .collect();
    let mut problems = Vec::new();
    let mut ids: Vec<&String> = tools
        .proposed
        .iter()
        .chain(model.proposals.keys())
        .collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let state = states.get(id.as_str()).copied();
        let fine = match (model.proposals.get(id), state) {
            (None, Some("proposed")) => true,
            (None, _) => false,
            (Some((true, true)), Some("idea")) => true,
            (Some((false, true)), None) => true,
            (Some((true, false)), Some("proposed" | "idea")) => true,
            (Some((false, false)), None | Some("proposed")) => true,
            (Some(_), _) => false,
        };
        if !fine {
            let decided = match model.proposals.get(id) {
                None => "undecided",
                Some((true, true)) => "accepted",
                Some((false, true)) => "declined",
                Some((true, false)) => "accepted, unacknowledged",
                Some((false, false)) => "declined, unacknowledged",
            };
            let state = state.unwrap_or("gone");
            problems.push(format!("proposed requirement {id} ({decided}) is {state}"));
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::super::model::{CLOSE_REASON, Shut};
    use super::*;
    use serde_json::json;

    #[test]
    fn a_closed_question_open_again_and_a_reopened_one_closed_are_found() {
        let mut m = Model::default();
        for (id, shut) in [
            ("q-1", Shut::Closed),
            ("q-2", Shut::Reopened),
            ("q-3", Shut::Closing),
            ("q-4", Shut::Reopening),
            ("q-5", Shut::Closed),
        ] {
            m.questions_shut.insert(id.into(), shut);
        }
        let fine = json!({"questions":[{"id":"q-2"},{"id":"q-3"}],"closed":[
            {"id":"q-1","closed_reason":CLOSE_REASON},{"id":"q-4","closed_reason":CLOSE_REASON},
            {"id":"q-5","closed_reason":CLOSE_REASON}]});
        assert!(check_shut_questions(&m, &fine).is_empty());
        let wrong = json!({"questions":[{"id":"q-1"},{"id":"q-4"}],"closed":[
            {"id":"q-2","closed_reason":CLOSE_REASON},{"id":"q-3","closed_reason":"answered"}]});
        // q-1 open again, q-2 closed, q-3 closed for another reason, q-5 lost.
        assert_eq!(check_shut_questions(&m, &wrong).len(), 4);
        // One answered afterwards is check_items' to judge.
        m.answers.insert("q-1".into(), "yes".into());
        assert_eq!(check_shut_questions(&m, &wrong).len(), 3);
        // Reopened, then an answer sent whose reply a kill cut off: closed as answered.
        let answered = json!({"questions":[{"id":"q-3"}],"closed":[
            {"id":"q-1","closed_reason":CLOSE_REASON},{"id":"q-2","closed_reason":"answered"},
            {"id":"q-4","closed_reason":CLOSE_REASON},{"id":"q-5","closed_reason":CLOSE_REASON}]});
        assert_eq!(check_shut_questions(&m, &answered).len(), 1);
        m.answers_sent.insert("q-2".into());
        assert!(check_shut_questions(&m, &answered).is_empty());
    }

    #[test]
    fn lost_and_wrongly_decided_proposals_are_found() {
        let mut m = Model::default();
        let tools = ToolAcks {
            proposed: ["R-1", "R-2", "R-3", "R-4", "R-5"].map(String::from).into(),
            ..ToolAcks::default()
        };
        m.proposals.insert("R-2".into(), (true, true));
        m.proposals.insert("R-3".into(), (false, true));
        m.proposals.insert("R-4".into(), (true, false));
        m.proposals.insert("R-5".into(), (false, false));
        let fine = json!({"requirements":[{"id":"R-1","state":"proposed"},
            {"id":"R-2","state":"idea"},{"id":"R-4","state":"proposed"}]});
        assert!(check_proposals(&m, &tools, &fine).is_empty());
        let wrong = json!({"requirements":[{"id":"R-2","state":"proposed"},
            {"id":"R-3","state":"proposed"},{"id":"R-4","state":"open"},
            {"id":"R-5","state":"idea"}]});
        // R-1 lost, R-2 not accepted, R-3 declined and back, R-4 and R-5 in a wrong state.
        assert_eq!(check_proposals(&m, &tools, &wrong).len(), 5);
    }
}
