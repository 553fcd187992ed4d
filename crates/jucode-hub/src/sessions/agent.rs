//! Sessions of long-lived agents: a new one starts in the agent's directory, and every start
//! (new, reopened, restarted) runs with the agent's settings and its [`AgentSeat`].

use std::path::PathBuf;
use std::sync::Arc;

use jucode_engine::agent::AgentSeat;
use jucode_protocol::Object;
use serde_json::Value;

use super::{Record, Session, SessionError, log::default_engine};
use crate::agents::DISPATCH;
use crate::agents::prompt::PromptFacts;
use crate::agents::tools::{Caller, HubAgentHost};
use crate::util::new_uuid;
use crate::{Hub, Inner};

impl Hub {
    /// Starts a new session of `agent` in its `cwd`, on the agent's engine unless `engine`
    /// names one. Returns the session id once its open record is saved and its engine started.
    pub(crate) fn start_agent_session(
        self: &Arc<Self>,
        inner: &mut Inner,
        agent: &str,
        engine: Option<String>,
        options: Object,
    ) -> Result<String, SessionError> {
        let config = inner
            .agents
            .get(agent)
            .map(|a| a.config.clone())
            .ok_or_else(|| SessionError::UnknownAgent(agent.to_string()))?;
        let engine = engine
            .or(config.engine.clone())
            .unwrap_or_else(default_engine);
        self.engine_factory(&engine)?;
        let cwd = config.cwd.clone();
        if !cwd.is_dir() {
            return Err(SessionError::AgentCwd {
                agent: agent.to_string(),
                cwd: cwd.display().to_string(),
            });
        }
        self.open_agent_session(inner, agent, engine, cwd, options)
    }

    /// Starts a dispatcher: a session of the reserved agent `dispatch` (which has no
    /// settings of its own) in `cwd`, on the jucode engine, asking before any change.
    pub(crate) fn start_dispatcher(
        self: &Arc<Self>,
        inner: &mut Inner,
        cwd: PathBuf,
    ) -> Result<String, SessionError> {
        let engine = crate::dispatch::DISPATCHER_ENGINE.to_string();
        self.engine_factory(&engine)?;
        let mut options = Object::new();
        options.insert("approval_mode".into(), Value::from("manual"));
        self.open_agent_session(inner, DISPATCH, engine, cwd, options)
    }

    fn open_agent_session(
        self: &Arc<Self>,
        inner: &mut Inner,
        agent: &str,
        engine: String,
        cwd: PathBuf,
        options: Object,
    ) -> Result<String, SessionError> {
        let session = new_uuid()?;
        let at = self.config.clock.now_ms();
        inner.sessions.append(&Record::Open {
            session: session.clone(),
            cwd: cwd.display().to_string(),
            engine: engine.clone(),
            agent: Some(agent.to_string()),
            chat: false,
            at,
        })?;
        inner.sessions.map.insert(
            session.clone(),
            Session::new(
                session.clone(),
                cwd,
                engine,
                false,
                Some(agent.to_string()),
                at,
            ),
        );
        if let Err(e) = self.start_engine(inner, &session, options, false, None) {
            let _ = inner.sessions.append(&Record::Close {
                session: session.clone(),
                at: self.config.clock.now_ms(),
            });
            inner.broadcast_sessions();
            return Err(e);
        }
        inner.broadcast_sessions();
        inner.broadcast_agents();
        Ok(session)
    }

    /// What an agent's session starts with: the agent's settings laid over the client's
    /// `options` (the agent's sandbox is not the client's to loosen), and its seat. `None`
    /// when the agent is gone (deleted while its sessions stay listed): the session then runs
    /// as a plain one.
    pub(super) fn agent_seat(
        self: &Arc<Self>,
        inner: &Inner,
        session: &str,
        agent: &str,
        options: &mut Object,
    ) -> Option<AgentSeat> {
        if agent == DISPATCH {
            return Some(crate::dispatch::tool::seat(self, inner, session));
        }
        let config = &inner.agents.get(agent)?.config;
        let settings = [
            ("approval_mode", Value::from(config.approval_mode.clone())),
            ("sandbox", Value::from(config.sandbox.clone())),
            ("network", Value::from(config.network)),
            (
                "directories",
                serde_json::to_value(&config.directories).unwrap_or_default(),
            ),
            (
                "command_rules",
                serde_json::to_value(&config.command_rules).unwrap_or_default(),
            ),
        ];
        for (key, value) in settings {
            options.insert(key.into(), value);
        }
        Some(AgentSeat {
            agent: agent.to_string(),
            host: Arc::new(HubAgentHost {
                hub: Arc::downgrade(self),
                caller: Caller {
                    agent: agent.to_string(),
                    session: session.to_string(),
                },
                start_prompt: PromptFacts::gather(inner, agent)
                    .map(|f| f.render())
                    .unwrap_or_default(),
            }),
        })
    }
}
