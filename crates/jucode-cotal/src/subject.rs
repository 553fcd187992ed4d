//! Cotal subject layout (SPEC §3): builders and the receive-side parser.
//!
//! A receiver trusts the subject, not the payload: the broker forge-locks the
//! sender tokens, so the sender principal is read from here.

/// Map every character outside `[A-Za-z0-9_-]` to `_` (lossy by design).
pub fn sanitize(token: &str) -> String {
    token
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Sanitize a dotted channel name segment by segment (empty segments dropped).
pub fn sanitize_channel(channel: &str) -> String {
    channel
        .split('.')
        .filter(|s| !s.is_empty())
        .map(sanitize)
        .collect::<Vec<_>>()
        .join(".")
}

/// Longest channel the spec allows (`MAX_CHANNEL_LENGTH`).
pub const MAX_CHANNEL_LENGTH: usize = 4096;

/// A principal `<owner>.<actor>`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub owner: String,
    pub actor: String,
}

impl Principal {
    pub fn new(owner: &str, actor: &str) -> Self {
        Principal {
            owner: sanitize(owner),
            actor: sanitize(actor),
        }
    }
    /// Dot form: card id, `from.id`, presence key.
    pub fn dot(&self) -> String {
        format!("{}.{}", self.owner, self.actor)
    }
    /// Dash form: durable names.
    pub fn dash(&self) -> String {
        format!("{}-{}", self.owner, self.actor)
    }
    /// Parse a dot-form id; `None` unless exactly two non-empty sanitized tokens.
    pub fn parse_dot(id: &str) -> Option<Principal> {
        let (owner, actor) = id.split_once('.')?;
        if owner.is_empty() || actor.is_empty() || actor.contains('.') {
            return None;
        }
        if sanitize(owner) != owner || sanitize(actor) != actor {
            return None;
        }
        Some(Principal {
            owner: owner.to_string(),
            actor: actor.to_string(),
        })
    }
}

/// Multicast subject for a publish on `channel` by `sender`.
pub fn chat(space: &str, sender: &Principal, channel: &str) -> String {
    format!(
        "cotal.{}.chat.{}.{}.{}",
        sanitize(space),
        sender.owner,
        sender.actor,
        sanitize_channel(channel)
    )
}

/// Live-read subscription for a channel (any sender).
pub fn chat_read(space: &str, channel: &str) -> String {
    format!(
        "cotal.{}.chat.*.*.{}",
        sanitize(space),
        sanitize_channel(channel)
    )
}

/// Unicast subject.
pub fn inst(space: &str, to: &Principal, from: &Principal) -> String {
    format!(
        "cotal.{}.inst.{}.{}.{}.{}",
        sanitize(space),
        to.owner,
        to.actor,
        from.owner,
        from.actor
    )
}

/// Anycast subject.
pub fn svc(space: &str, role: &str, from: &Principal) -> String {
    format!(
        "cotal.{}.svc.{}.{}.{}",
        sanitize(space),
        sanitize(role),
        from.owner,
        from.actor
    )
}

/// The AG-UI event channel of a principal (derived from the principal, never the name).
pub fn event_channel(p: &Principal) -> String {
    format!("events.{}.{}", p.owner, p.actor)
}

/// How a delivery reached us, read from the subject kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Channel { channel: String },
    Direct { recipient: Principal },
    Anycast { role: String },
}

/// A parsed delivery subject.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub space: String,
    pub sender: Principal,
    pub delivery: Delivery,
}

/// Split a delivery subject; `None` for a wrong prefix or per-kind arity
/// (such a subject has no sender and is never read as a delivery).
pub fn parse(subject: &str) -> Option<Parsed> {
    let t: Vec<&str> = subject.split('.').collect();
    if t.len() < 5 || t[0] != "cotal" || t.iter().any(|s| s.is_empty()) {
        return None;
    }
    let space = t[1].to_string();
    let p = |o: &str, a: &str| Principal {
        owner: o.to_string(),
        actor: a.to_string(),
    };
    match t[2] {
        "chat" if t.len() >= 6 => Some(Parsed {
            space,
            sender: p(t[3], t[4]),
            delivery: Delivery::Channel {
                channel: t[5..].join("."),
            },
        }),
        "inst" if t.len() == 7 => Some(Parsed {
            space,
            sender: p(t[5], t[6]),
            delivery: Delivery::Direct {
                recipient: p(t[3], t[4]),
            },
        }),
        "svc" if t.len() == 6 => Some(Parsed {
            space,
            sender: p(t[4], t[5]),
            delivery: Delivery::Anycast {
                role: t[3].to_string(),
            },
        }),
        _ => None,
    }
}

/// Is `owner` a principal owner token (`local` or `u_` + 26 base32-lower)?
pub fn is_owner_token(owner: &str) -> bool {
    if owner == "local" {
        return true;
    }
    match owner.strip_prefix("u_") {
        Some(rest) => {
            rest.len() == 26
                && rest
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || ('2'..='7').contains(&c))
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_and_parses_each_kind() {
        let me = Principal::new("local", "alice");
        let bob = Principal::new("local", "bob");
        let s = chat("dev", &me, "team.backend");
        assert_eq!(s, "cotal.dev.chat.local.alice.team.backend");
        let p = parse(&s).unwrap();
        assert_eq!(p.sender, me);
        assert_eq!(
            p.delivery,
            Delivery::Channel {
                channel: "team.backend".into()
            }
        );
        let s = inst("dev", &bob, &me);
        assert_eq!(s, "cotal.dev.inst.local.bob.local.alice");
        let p = parse(&s).unwrap();
        assert_eq!(p.sender, me);
        assert_eq!(p.delivery, Delivery::Direct { recipient: bob });
        let p = parse(&svc("dev", "reviewer", &me)).unwrap();
        assert_eq!(
            p.delivery,
            Delivery::Anycast {
                role: "reviewer".into()
            }
        );
    }

    #[test]
    fn wrong_arity_has_no_sender() {
        assert!(parse("cotal.dev.inst.local.bob.local").is_none());
        assert!(parse("cotal.dev.svc.role.local.a.extra").is_none());
        assert!(parse("cotal.dev.chat.local.alice").is_none());
        assert!(parse("nats.dev.chat.local.alice.general").is_none());
        assert!(parse("cotal.dev.chat..alice.general").is_none());
    }

    #[test]
    fn sanitizes_tokens() {
        assert_eq!(sanitize("a b.c*"), "a_b_c_");
        assert_eq!(sanitize_channel("team..back end"), "team.back_end");
        assert!(is_owner_token("local"));
        assert!(is_owner_token("u_abcdefghijklmnopqrstuvwxyz"));
        assert!(!is_owner_token("u_short"));
        assert_eq!(
            Principal::parse_dot("local.bob"),
            Some(Principal::new("local", "bob"))
        );
        assert!(Principal::parse_dot("local.bob.x").is_none());
    }
}
