//! Client ops into ACP requests: prompts, cancels, permission answers and mode changes.

use super::*;

impl Acp {
    pub(super) async fn handle_op(&mut self, op: Object) -> bool {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let result: Result<(), String> = match name.as_str() {
            "shutdown" => return false,
            "user_message" => match Message::from_op(&op) {
                Ok(message) => return self.user_message(message).await,
                Err(e) => Err(e),
            },
            // An ACP agent takes its own slash commands as prompt text.
            "command" => {
                let text = op
                    .get("input")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .trim()
                    .to_string();
                return self
                    .user_message(Message {
                        content: text,
                        images: Vec::new(),
                    })
                    .await;
            }
            "interrupt" => return self.interrupt().await,
            "approve" => match Answer::from_op(&op) {
                Ok(answer) => return self.approve(answer).await,
                Err(e) => Err(e),
            },
            "set_approval_mode" => match mode_of(&op) {
                Ok(mode) => return self.set_mode(mode).await,
                Err(e) => Err(e),
            },
            "set_attended" | "snapshot" | "rename" | "tui" => Ok(()),
            _ => Err(format!("{name} is not available in ACP sessions")),
        };
        match result {
            Ok(()) => true,
            Err(message) => self.emit(error(message)).await,
        }
    }

    async fn user_message(&mut self, message: Message) -> bool {
        if self.busy || self.agent_session.is_none() {
            let events = self.queue.push(message);
            return self.emit_all(events).await;
        }
        self.start_turn(message).await
    }

    pub(super) async fn start_turn(&mut self, message: Message) -> bool {
        let Some(session) = self.agent_session.clone() else {
            return true;
        };
        let mut prompt = vec![json!({"type": "text", "text": message.content})];
        let mut notes = Vec::new();
        let mut refused = Vec::new();
        for path in &message.images {
            if !self.image_prompts {
                refused.push(path.clone());
                notes.push(info(format!(
                    "image not attached: {path}: the agent takes no images"
                )));
                continue;
            }
            match load_image(path, &self.image_roots) {
                Ok(Image::Inline { media_type, data }) => {
                    prompt.push(json!({"type": "image", "data": data, "mimeType": media_type}))
                }
                Ok(Image::Path(p)) => prompt.push(json!({
                    "type": "resource_link", "uri": format!("file://{}", p.display()),
                    "name": p.file_name().map(|n| n.to_string_lossy().to_string()).unwrap_or_default(),
                })),
                Err(e) => {
                    refused.push(path.clone());
                    notes.push(info(format!("image not attached: {e}")))
                }
            }
        }
        if !self.emit_all(notes).await
            || !self.emit(message.event_without(&refused)).await
            || !self.emit(event("connecting", json!({}))).await
        {
            return false;
        }
        self.busy = true;
        self.in_message = false;
        self.request(
            Request::Prompt,
            "session/prompt",
            json!({"sessionId": session, "prompt": prompt}),
        )
        .await
    }

    async fn interrupt(&mut self) -> bool {
        let Some(session) = self.agent_session.clone() else {
            return true;
        };
        if !self.busy {
            return true;
        }
        let ok = self
            .write(json!({"method": "session/cancel", "params": {"sessionId": session}}))
            .await;
        // The protocol asks the client to answer open prompts `cancelled`.
        for (_, p) in self.approvals.take_all() {
            self.write(json!({"id": p.id, "result": {"outcome": {"outcome": "cancelled"}}}))
                .await;
        }
        let _ = ok;
        true
    }

    async fn approve(&mut self, answer: Answer) -> bool {
        let permission = match self.approvals.take(&answer.call_id) {
            Taken::Open(p) => p,
            Taken::AlreadyAnswered => return true,
            Taken::Unknown => return self.emit(no_open_approval(&answer.call_id)).await,
        };
        if !answer.allow {
            self.denied.insert(answer.call_id.clone());
        }
        let outcome = match pick_option(&permission.options, answer.allow, answer.always) {
            Some(id) => json!({"outcome": "selected", "optionId": id}),
            None => json!({"outcome": "cancelled"}),
        };
        self.write(json!({"id": permission.id, "result": {"outcome": outcome}}))
            .await
    }

    async fn set_mode(&mut self, mode: ApprovalMode) -> bool {
        self.mode = mode;
        match (mode_id(mode), self.agent_session.clone()) {
            (id, Some(session)) if self.modes.iter().any(|m| m == id) => {
                let params = json!({"sessionId": session, "modeId": id});
                self.request(Request::SetMode(mode), "session/set_mode", params)
                    .await
            }
            _ => {
                self.emit(error(format!("the agent offers no {} mode", mode.as_str())))
                    .await
            }
        }
    }
}
