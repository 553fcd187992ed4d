//! Where a message goes and what text it arrives as: pure functions of what the hub knows,
//! so the spec's order can be tested as a table.

/// What routing reads of one session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SessionFacts {
    pub(crate) id: String,
    pub(crate) agent: Option<String>,
    pub(crate) hidden: bool,
    pub(crate) archived: bool,
    /// Its last activity (a turn started or ended), in ms.
    pub(crate) updated_at: u64,
}

/// What routing reads of the message a new one replies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Earlier {
    /// The session it was delivered to, once delivered.
    pub(crate) delivered_to: Option<String>,
    /// The session it was sent from (an agent's `message_agent` call).
    pub(crate) sent_from: Option<String>,
}

/// What routing reads of the message itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Wanted<'a> {
    pub(crate) to: &'a str,
    pub(crate) from_user: bool,
    pub(crate) session: Option<&'a str>,
    pub(crate) new_session: bool,
    /// The message named by `reply_to`, when it is one this daemon recorded.
    pub(crate) reply_to: Option<&'a Earlier>,
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Session(String),
    NewSession,
    Undeliverable(String),
}

/// Routes `msg` among `sessions` (every session the hub knows), in the spec's order: the
/// session it names, the session that received the message it replies to, for a message from
/// the user the agent's most recently active session, else a new session.
pub(crate) fn route<'s>(
    msg: &Wanted<'_>,
    sessions: impl IntoIterator<Item = &'s SessionFacts>,
) -> Route {
    if msg.new_session {
        return Route::NewSession;
    }
    let sessions: Vec<&SessionFacts> = sessions.into_iter().collect();
    let find = |id: &str| sessions.iter().copied().find(|s| s.id == id);
    let agents = |s: &SessionFacts| s.agent.as_deref() == Some(msg.to);
    if let Some(named) = msg.session {
        return match find(named) {
            Some(s) if agents(s) => Route::Session(s.id.clone()),
            Some(_) => Route::Undeliverable(format!(
                "session {named} is not a session of agent {}",
                msg.to
            )),
            None => Route::Undeliverable(format!("unknown session {named}")),
        };
    }
    if let Some(earlier) = msg.reply_to {
        // The session that received it, or (for a reply to another agent's message) the
        // session that sent it: whichever is this agent's.
        let candidates = [&earlier.delivered_to, &earlier.sent_from];
        if let Some(s) = candidates
            .into_iter()
            .flatten()
            .filter_map(|id| find(id))
            .find(|s| agents(s))
        {
            return Route::Session(s.id.clone());
        }
    }
    if msg.from_user
        && let Some(s) = sessions
            .iter()
            .filter(|s| agents(s) && !s.hidden && !s.archived)
            .max_by(|a, b| a.updated_at.cmp(&b.updated_at).then(b.id.cmp(&a.id)))
    {
        return Route::Session(s.id.clone());
    }
    Route::NewSession
}

/// The text a message is delivered as: the user's verbatim, anything else under a line
/// naming where it comes from and its id.
pub(crate) fn delivery_text(id: &str, from: &str, body: &str) -> String {
    if from == "user" {
        return body.to_string();
    }
    let origin = match from.split_once(':') {
        Some(("agent", agent)) => format!("message from agent {agent}"),
        Some(("timer", timer)) => format!("timer {timer} fired"),
        Some(("schedule", task)) => format!("scheduled task {task}"),
        Some(("question", question)) => format!("answer to your question {question}"),
        _ => format!("message from {from}"),
    };
    format!("[{origin} · {id}]\n{body}")
}

/// Whether `line` is the header [`delivery_text`] puts above a message that is not the user's.
pub(crate) fn is_delivery_header(line: &str) -> bool {
    line.strip_prefix('[')
        .and_then(|l| l.strip_suffix(']'))
        .and_then(|l| l.rsplit_once(" · "))
        .is_some_and(|(_, id)| id.starts_with("m-") && !id.contains(char::is_whitespace))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn s(id: &str, agent: Option<&str>, updated_at: u64) -> SessionFacts {
        SessionFacts {
            id: id.into(),
            agent: agent.map(str::to_string),
            hidden: false,
            archived: false,
            updated_at,
        }
    }

    fn wanted<'a>(from_user: bool) -> Wanted<'a> {
        Wanted {
            to: "ops",
            from_user,
            session: None,
            new_session: false,
            reply_to: None,
        }
    }

    #[test]
    fn routing_follows_the_spec_order() {
        let mut hidden = s("hidden", Some("ops"), 900);
        hidden.hidden = true;
        let mut archived = s("archived", Some("ops"), 800);
        archived.archived = true;
        let sessions = vec![
            s("old", Some("ops"), 10),
            s("new", Some("ops"), 20),
            s("other", Some("web"), 30),
            s("plain", None, 40),
            hidden,
            archived,
        ];
        let delivered_old = Earlier {
            delivered_to: Some("old".into()),
            sent_from: None,
        };
        let sent_from_old = Earlier {
            delivered_to: Some("other".into()),
            sent_from: Some("old".into()),
        };
        let gone = Earlier {
            delivered_to: Some("vanished".into()),
            sent_from: None,
        };
        let not_yet = Earlier {
            delivered_to: None,
            sent_from: None,
        };
        let session = |id| Route::Session(String::from(id));
        let cases: Vec<(&str, Wanted, Route)> = vec![
            ("user, no hints: most recent", wanted(true), session("new")),
            (
                "agent, no hints: a new one",
                wanted(false),
                Route::NewSession,
            ),
            (
                "named session wins over everything but new_session",
                Wanted {
                    session: Some("old"),
                    reply_to: Some(&sent_from_old),
                    ..wanted(true)
                },
                session("old"),
            ),
            (
                "named session of another agent",
                Wanted {
                    session: Some("other"),
                    ..wanted(true)
                },
                Route::Undeliverable("session other is not a session of agent ops".into()),
            ),
            (
                "named plain session",
                Wanted {
                    session: Some("plain"),
                    ..wanted(false)
                },
                Route::Undeliverable("session plain is not a session of agent ops".into()),
            ),
            (
                "named unknown session",
                Wanted {
                    session: Some("nope"),
                    ..wanted(false)
                },
                Route::Undeliverable("unknown session nope".into()),
            ),
            (
                "reply: the session that received it",
                Wanted {
                    reply_to: Some(&delivered_old),
                    ..wanted(false)
                },
                session("old"),
            ),
            (
                "reply to another agent's message: the session that sent it",
                Wanted {
                    reply_to: Some(&sent_from_old),
                    ..wanted(false)
                },
                session("old"),
            ),
            (
                "reply whose session is gone: user falls to most recent",
                Wanted {
                    reply_to: Some(&gone),
                    ..wanted(true)
                },
                session("new"),
            ),
            (
                "reply not delivered yet: agent falls to a new session",
                Wanted {
                    reply_to: Some(&not_yet),
                    ..wanted(false)
                },
                Route::NewSession,
            ),
            (
                "new_session beats a named session",
                Wanted {
                    session: Some("old"),
                    new_session: true,
                    ..wanted(true)
                },
                Route::NewSession,
            ),
        ];
        for (name, msg, want) in cases {
            assert_eq!(route(&msg, &sessions), want, "{name}");
        }
    }

    #[test]
    fn a_user_message_to_an_agent_without_sessions_starts_one() {
        let sessions = vec![s("x", Some("web"), 5)];
        assert_eq!(route(&wanted(true), &sessions), Route::NewSession);
        // Ties on activity go to the lower id, so the choice never depends on map order.
        let tied = vec![s("b", Some("ops"), 5), s("a", Some("ops"), 5)];
        assert_eq!(route(&wanted(true), &tied), Route::Session("a".into()));
    }

    #[test]
    fn delivery_text_names_the_origin_and_the_id() {
        assert_eq!(delivery_text("m-1-1", "user", "hello"), "hello");
        let cases = [
            ("agent:web", "[message from agent web · m-1-1]\nhi"),
            ("timer:tm-5-2", "[timer tm-5-2 fired · m-1-1]\nhi"),
            ("schedule:sch-ab", "[scheduled task sch-ab · m-1-1]\nhi"),
            (
                "question:q-3-4",
                "[answer to your question q-3-4 · m-1-1]\nhi",
            ),
            ("bot", "[message from bot · m-1-1]\nhi"),
        ];
        for (from, want) in cases {
            assert_eq!(delivery_text("m-1-1", from, "hi"), want, "{from}");
        }
    }
}
