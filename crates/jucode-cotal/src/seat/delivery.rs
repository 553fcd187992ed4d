//! What reaches the inbox: the directed-mail durables, the channel backstop, live channel
//! subscriptions, and the check every delivery passes first.

use std::sync::Arc;
use std::time::Duration;

use async_nats::jetstream::AckKind;
use async_nats::jetstream::consumer::{self, AckPolicy, DeliverPolicy};
use async_nats::jetstream::message::Acker;
use futures_util::StreamExt;
use tokio::task::JoinHandle;

use super::Seat;
use crate::envelope::{self, CotalMessage};
use crate::inbox::{Item, Kind, Offer};
use crate::mesh::ACK_WAIT;
use crate::subject::{self, Delivery};
use crate::{Error, Result};

/// How long one pull request of the open-mode backstop stays at the broker.
const BACKSTOP_PULL: Duration = Duration::from_secs(5);

impl Seat {
    /// Bind (authed) or create (open) the directed-mail durables and pump them.
    pub(super) async fn start_durables(self: Arc<Self>) -> Result<Vec<JoinHandle<()>>> {
        let me = &self.cfg.principal;
        let create = self.cfg.is_open();
        let mut tasks = Vec::new();
        let dm = self
            .mesh
            .durable(
                &self.mesh.names.dm_stream.clone(),
                consumer::pull::Config {
                    durable_name: Some(format!("dm_{}-{}", me.dash(), self.cfg.lifecycle_uid)),
                    filter_subject: format!(
                        "cotal.{}.inst.{}.{}.*.*",
                        self.cfg.space, me.owner, me.actor
                    ),
                    ack_policy: AckPolicy::Explicit,
                    ack_wait: ACK_WAIT,
                    deliver_policy: DeliverPolicy::New,
                    ..Default::default()
                },
                create,
            )
            .await?;
        tasks.push(tokio::spawn(self.clone().pump(dm)));
        if let Some(role) = &self.cfg.role {
            let role = subject::sanitize(role);
            let svc = self
                .mesh
                .durable(
                    &self.mesh.names.task_stream.clone(),
                    consumer::pull::Config {
                        durable_name: Some(format!("svc_{role}")),
                        filter_subject: format!("cotal.{}.svc.{role}.*.*", self.cfg.space),
                        ack_policy: AckPolicy::Explicit,
                        ack_wait: ACK_WAIT,
                        ..Default::default()
                    },
                    create,
                )
                .await?;
            tasks.push(tokio::spawn(self.clone().pump(svc)));
        }
        // Durable channel backstop: provisioned by the delivery daemon in authed
        // modes; in open mode the seat creates its own once it joined channels.
        if create {
            tasks.push(tokio::spawn(self.clone().pump_backstop()));
        } else {
            let name = format!("dlv_{}-{}", me.dash(), self.cfg.lifecycle_uid);
            match self.mesh.js.get_stream(&self.mesh.names.chat_stream).await {
                Ok(stream) => match stream.get_consumer(&name).await {
                    Ok(c) => tasks.push(tokio::spawn(self.clone().pump(c))),
                    Err(e) => {
                        tracing::info!(durable = %name, error = %e, "no durable channel backstop bound")
                    }
                },
                Err(e) => tracing::warn!(error = %e, "chat stream not reachable"),
            }
        }
        Ok(tasks)
    }

    /// The backstop durable's name (`dlv_<owner>-<actor>-<uid>`).
    fn backstop_name(&self) -> String {
        format!(
            "dlv_{}-{}",
            self.cfg.principal.dash(),
            self.cfg.lifecycle_uid
        )
    }

    /// Open mode: create or update our own `dlv_` durable so it covers exactly
    /// the joined channels (removed when none is joined). Authed modes never do this.
    pub(crate) async fn sync_backstop(&self) -> Result<()> {
        if !self.cfg.is_open() {
            return Ok(());
        }
        let name = self.backstop_name();
        let filters: Vec<String> = self
            .state()
            .joined
            .iter()
            .map(|ch| subject::chat_read(&self.cfg.space, ch))
            .collect();
        let stream = &self.mesh.names.chat_stream;
        if filters.is_empty() {
            if let Ok(s) = self.mesh.js.get_stream_no_info(stream).await {
                let _ = s.delete_consumer(&name).await;
            }
            return Ok(());
        }
        let config = consumer::pull::Config {
            durable_name: Some(name.clone()),
            filter_subjects: filters,
            ack_policy: AckPolicy::Explicit,
            ack_wait: ACK_WAIT,
            deliver_policy: DeliverPolicy::New,
            ..Default::default()
        };
        self.mesh
            .js
            .create_consumer_on_stream(config, stream.as_str())
            .await
            .map_err(|e| Error::Mesh(format!("cannot create durable {name}: {e}")))?;
        self.backstop_kick.notify_one();
        Ok(())
    }

    /// Pump the open-mode backstop, binding it by name each round (it is
    /// re-created as channels are joined and left).
    async fn pump_backstop(self: Arc<Self>) {
        let name = self.backstop_name();
        loop {
            let bound = match self
                .mesh
                .js
                .get_stream_no_info(&self.mesh.names.chat_stream)
                .await
            {
                Ok(s) => s.get_consumer::<consumer::pull::Config>(&name).await.ok(),
                Err(_) => None,
            };
            let Some(c) = bound else {
                // No channel joined yet (or the broker is away): wait for a join.
                tokio::select! {
                    _ = self.backstop_kick.notified() => {}
                    _ = tokio::time::sleep(BACKSTOP_PULL) => {}
                }
                continue;
            };
            // Short pull requests: one left behind by a killed seat expires soon,
            // so mail stored right after a crash is not parked until ack_wait.
            if let Ok(mut stream) = c
                .stream()
                .expires(BACKSTOP_PULL)
                .heartbeat(BACKSTOP_PULL / 2)
                .messages()
                .await
            {
                while let Some(Ok(msg)) = stream.next().await {
                    let (m, acker) = msg.split();
                    self.deliver(m.subject.as_str(), &m.payload, Some(acker), false)
                        .await;
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Pull deliveries from one durable forever (the client reconnects underneath).
    async fn pump(self: Arc<Self>, consumer: consumer::Consumer<consumer::pull::Config>) {
        loop {
            match consumer.messages().await {
                Ok(mut stream) => {
                    while let Some(next) = stream.next().await {
                        match next {
                            Ok(msg) => {
                                let (m, acker) = msg.split();
                                self.deliver(m.subject.as_str(), &m.payload, Some(acker), false)
                                    .await;
                            }
                            Err(e) => {
                                tracing::debug!(error = %e, "durable pull error");
                                break;
                            }
                        }
                    }
                }
                Err(e) => tracing::debug!(error = %e, "durable stream failed"),
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Check one delivery and offer it to the inbox. Malformed, sender-mismatched
    /// and unparsable deliveries are terminated, never redelivered.
    pub(crate) async fn deliver(
        &self,
        subj: &str,
        payload: &[u8],
        ack: Option<Acker>,
        historical: bool,
    ) {
        let checked = match envelope::check(subj, payload) {
            Ok(c) => c,
            Err(reject) => {
                tracing::warn!(subject = %subj, reason = %reject, "terminating a bad delivery");
                if let Some(a) = ack
                    && let Err(e) = a.ack_with(AckKind::Term).await
                {
                    tracing::debug!(error = %e, "term failed");
                }
                return;
            }
        };
        if checked.subject.space != self.cfg.space {
            if let Some(a) = ack {
                let _ = a.ack_with(AckKind::Term).await;
            }
            return;
        }
        if checked.subject.sender == self.cfg.principal {
            // Our own channel traffic coming back.
            if let Some(a) = ack {
                let _ = a.ack().await;
            }
            return;
        }
        let item = self.item_from(&checked.message, &checked.subject.delivery, historical);
        let (offer, evicted) = self.state().inbox.offer(item, ack);
        for e in evicted {
            // Dropped un-acked: directed mail redelivers after ack_wait.
            tracing::info!(id = %e.item.id, "inbox full: evicted un-acked");
        }
        match offer {
            Offer::Accepted(_) => {
                self.kick();
                self.touch_presence();
            }
            Offer::Duplicate { ack_now } | Offer::Dropped { ack_now } => {
                if let Some(a) = ack_now {
                    let _ = a.ack().await;
                }
            }
        }
    }

    fn item_from(&self, msg: &CotalMessage, delivery: &Delivery, historical: bool) -> Item {
        let me = self.cfg.name.to_lowercase();
        let (kind, channel, service) = match delivery {
            Delivery::Channel { channel } => (Kind::Channel, Some(channel.clone()), None),
            Delivery::Direct { .. } => (Kind::Dm, None, None),
            Delivery::Anycast { role } => (Kind::Anycast, None, Some(role.clone())),
        };
        let mentions_me = msg
            .mentions
            .as_ref()
            .is_some_and(|m| m.iter().any(|n| n.to_lowercase() == me));
        Item {
            id: msg.id.clone(),
            ts: msg.ts,
            from_id: msg.from.id.clone(),
            from_name: msg.from.name.clone(),
            from_role: msg.from.role.clone(),
            kind,
            channel,
            service,
            mentions_me,
            historical,
            text: envelope::text_of(msg),
        }
    }

    /// Subscribe a channel live (core subscription) and record the membership.
    pub(crate) async fn join(self: &Arc<Self>, channel: &str) -> Result<()> {
        let ch = subject::sanitize_channel(channel);
        if ch.is_empty() || ch.len() > subject::MAX_CHANNEL_LENGTH {
            return Err(Error::Wire("channel name is empty or too long".into()));
        }
        if self
            .live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .contains_key(&ch)
        {
            return Ok(());
        }
        let mut sub = self
            .mesh
            .client
            .subscribe(subject::chat_read(&self.cfg.space, &ch))
            .await
            .map_err(Error::mesh)?;
        let seat = self.clone();
        let task = tokio::spawn(async move {
            while let Some(m) = sub.next().await {
                seat.deliver(m.subject.as_str(), &m.payload, None, false)
                    .await;
            }
        });
        self.live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(ch.clone(), task);
        self.state().joined.insert(ch);
        if self.state().mesh_ready {
            self.sync_backstop().await?;
        }
        Ok(())
    }

    pub(crate) fn leave(&self, channel: &str) -> bool {
        let ch = subject::sanitize_channel(channel);
        let task = self
            .live_subs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&ch);
        if let Some(t) = &task {
            t.abort();
        }
        self.state().joined.remove(&ch);
        task.is_some()
    }
}
